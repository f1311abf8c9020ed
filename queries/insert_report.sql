-- Record one report's headline figures ($figures: JSON text) for the next
-- report's trend, stamped with the latest ingest it saw.
INSERT INTO reports VALUES (
    (SELECT coalesce(max(report_id), 0) + 1 FROM reports),
    $generated_at, $at, $start, $end, $step_s, $scenario,
    (SELECT max(ingest_id) FROM ingests), $figures
)
