-- The newest recorded run of each what-if kind.
-- Output: kind, run_id, created_at, at, scenario, ingest_id, options, document,
-- stale (true when an ingest landed after the run, so its figures describe older data).
SELECT
    r.kind, r.run_id, r.created_at, r."at", r.scenario, r.ingest_id, r.options, r.document,
    coalesce((SELECT max(ingest_id) FROM ingests), 0) > coalesce(r.ingest_id, 0) AS stale
FROM whatif_runs AS r
QUALIFY row_number() OVER (PARTITION BY r.kind ORDER BY r.run_id DESC) = 1
ORDER BY r.kind
