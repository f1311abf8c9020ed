-- Raw native telemetry rows that rollup_telemetry leaves out, because native ingest
-- would reject them: a required value missing, a fraction outside 0..1, a negative
-- gpu_index. Reads the logical table raw_telemetry.
-- Output: one row: rows (BIGINT: all raw rows), skipped (BIGINT).
SELECT count(*) AS "rows",
       count(*) - count(*) FILTER (
           WHERE ts IS NOT NULL AND node_id IS NOT NULL AND gpu_index IS NOT NULL
             AND sm_active IS NOT NULL
             AND CAST(gpu_index AS BIGINT) >= 0
             AND CAST(sm_active AS DOUBLE) BETWEEN 0 AND 1
             AND (mem_used IS NULL OR CAST(mem_used AS DOUBLE) BETWEEN 0 AND 1)
       ) AS skipped
FROM raw_telemetry
