-- The ASI release's pod table as the adapter reads it (view _asi_pod_rows): from
-- _asi_pod_files, the block's day=D/hour=HH partition files with each row's file name and
-- row number (filename, file_row_number, from 0) and the partition keys (day, hour; t is
-- the trace hour), which each engine registers as it reads Parquet (asi2026.register_rows:
-- DuckDB's read_parquet, Spark's _metadata). `fault`: the first column whose value the
-- mapping cannot take, or NULL. The loading queries keep the rows without a fault; the
-- rejects queries read the others. Nulls become 0 where the paper's scripts coerce them.
-- A NaN or an infinity is a fault in every numeric column (isfinite: a bound alone would
-- not do, since DuckDB folds a bound that a file's statistics say always holds, and those
-- statistics leave NaN out). Portable: both engines run this text.
SELECT *,
       CASE WHEN pod_id IS NULL THEN 'pod_id'
            WHEN server_id IS NULL THEN 'server_id'
            WHEN NOT isfinite(gpu_request) THEN 'gpu_request'
            WHEN NOT isfinite(cpu_request_cores) THEN 'cpu_request_cores'
            WHEN NOT isfinite(used_gpu_hours) THEN 'used_gpu_hours'
            WHEN NOT isfinite(avg_gpu_sm_util) THEN 'avg_gpu_sm_util'
            WHEN NOT (isfinite(schedule_delay) AND schedule_delay = floor(schedule_delay)
                      AND abs(schedule_delay) < 9e15) THEN 'schedule_delay_sec'
       END AS fault
FROM (
    SELECT filename, file_row_number,
           CAST(day AS INTEGER) * 24 + CAST(hour AS INTEGER) AS t,
           pod_id, workload_id, server_id, cluster_id, state_public, priority_class,
           job_type_public, model_type_public,
           CAST(is_genai_request AS BOOLEAN) AS is_genai_request,
           COALESCE(CAST(gpu_request AS DOUBLE), 0) AS gpu_request,
           COALESCE(CAST(cpu_request_cores AS DOUBLE), 0) AS cpu_request_cores,
           COALESCE(CAST(used_gpu_hours AS DOUBLE), 0) AS used_gpu_hours,
           CAST(avg_gpu_sm_util AS DOUBLE) AS avg_gpu_sm_util,
           CAST(ready_status AS BOOLEAN) AS ready_status,
           CAST(schedule_delay_sec AS DOUBLE) AS schedule_delay
    FROM _asi_pod_files
) AS p
