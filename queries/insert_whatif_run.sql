-- Record one what-if run ($kind: compaction or harvesting) with its options and
-- its --json document (both JSON text), stamped with the latest ingest it saw.
INSERT INTO whatif_runs VALUES (
    (SELECT coalesce(max(run_id), 0) + 1 FROM whatif_runs),
    now()::TIMESTAMP, $kind, $at, $scenario,
    (SELECT max(ingest_id) FROM ingests), $options, $document
)
