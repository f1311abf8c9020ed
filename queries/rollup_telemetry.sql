-- Raw native telemetry ($interval_us microseconds per interval) rolled up per
-- (node_id, gpu_index, alloc_id, interval): one row per GPU, allocation and interval,
-- with the means of sm_active and mem_used and the number of samples. Reads the
-- logical table raw_telemetry (native columns, from the Parquet files the engine registers).
-- Rows that native ingest would reject (a required value missing, a fraction outside
-- 0..1, a negative gpu_index) are left out, and rollup_telemetry_skipped counts them.
-- ts is the interval's first sample, so (node_id, gpu_index, ts) stays a key.
-- The means are taken in fixed point: each value is rounded to a multiple of 2^-44
-- (17592186044416 = 2^44; about 6e-14) and the multiples are summed exactly (DECIMAL),
-- so that the sum does not depend on the order in which an engine adds the samples,
-- and DuckDB and Spark give the same bits (for up to 2^20 samples in a row).
-- Portable: runs on DuckDB as written and on Spark through fleetaudit.model.spark_sql.
-- Output: ts (TIMESTAMP), node_id (VARCHAR), gpu_index (BIGINT), alloc_id (VARCHAR),
--   sm_active (DOUBLE: mean), mem_used (DOUBLE: mean of the samples that have one),
--   both to about 6e-14 (fixed point, above),
--   samples (BIGINT), sample_interval_s (DOUBLE: (last - first) / (samples - 1),
--   NULL for one sample), ordered by ts, node_id, gpu_index, alloc_id.
WITH clean AS (
    SELECT epoch_us(CAST(ts AS TIMESTAMP)) AS ts_us,
           CAST(node_id AS VARCHAR) AS node_id,
           CAST(gpu_index AS BIGINT) AS gpu_index,
           CAST(alloc_id AS VARCHAR) AS alloc_id,
           CAST(sm_active AS DOUBLE) AS sm_active,
           CAST(mem_used AS DOUBLE) AS mem_used
    FROM raw_telemetry
    WHERE ts IS NOT NULL AND node_id IS NOT NULL AND gpu_index IS NOT NULL
      AND sm_active IS NOT NULL
      AND CAST(gpu_index AS BIGINT) >= 0
      AND CAST(sm_active AS DOUBLE) BETWEEN 0 AND 1
      AND (mem_used IS NULL OR CAST(mem_used AS DOUBLE) BETWEEN 0 AND 1)
)
SELECT make_timestamp(min(ts_us)) AS ts,
       node_id,
       gpu_index,
       alloc_id,
       CAST(sum(CAST(round(sm_active * CAST(17592186044416 AS DOUBLE)) AS DECIMAL(38, 0)))
            AS DOUBLE) / count(*) / CAST(17592186044416 AS DOUBLE) AS sm_active,
       CASE WHEN count(mem_used) > 0
            THEN CAST(sum(CAST(round(mem_used * CAST(17592186044416 AS DOUBLE)) AS DECIMAL(38, 0)))
                      AS DOUBLE) / count(mem_used) / CAST(17592186044416 AS DOUBLE)
       END AS mem_used,
       count(*) AS samples,
       CASE WHEN count(*) > 1
            THEN (max(ts_us) - min(ts_us)) / (count(*) - 1) / 1000000.0
       END AS sample_interval_s
FROM clean
GROUP BY node_id, gpu_index, alloc_id, ts_us // $interval_us
ORDER BY ts, node_id, gpu_index, alloc_id
