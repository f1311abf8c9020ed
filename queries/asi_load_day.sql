-- One day of the ASI release's pod table, pruned to the adapter's columns, with the trace hour t.
-- $files: the day's pod partition files. Nulls become 0 where the paper's scripts coerce them.
-- No file name or row number per row (the name is the longest value of a row): asi_pod_rejects reads
-- them from the files for the few rows without an id.
-- h: the one 64-bit hash of the seven run keys that asi_day_runs groups by (see
-- asi_mark_runs), computed once here rather than in each pass over the block's rows.
CREATE OR REPLACE TEMP TABLE _asi_day AS
SELECT *,
       hash(pod_id, server_id, gpu_request, cpu_request_cores, priority_class,
            job_type_public, state_public IS NOT DISTINCT FROM 'Standby') AS h
FROM (
SELECT
    CAST(day AS INTEGER) * 24 + CAST(hour AS INTEGER) AS t,
    pod_id, workload_id, server_id, cluster_id, state_public, priority_class,
    job_type_public, model_type_public, CAST(is_genai_request AS BOOLEAN) AS is_genai_request,
    COALESCE(CAST(gpu_request AS DOUBLE), 0) AS gpu_request,
    COALESCE(CAST(cpu_request_cores AS DOUBLE), 0) AS cpu_request_cores,
    COALESCE(CAST(used_gpu_hours AS DOUBLE), 0) AS used_gpu_hours,
    CAST(avg_gpu_sm_util AS DOUBLE) AS avg_gpu_sm_util,
    CAST(ready_status AS BOOLEAN) AS ready_status,
    CAST(schedule_delay_sec AS BIGINT) AS schedule_delay_sec
FROM read_parquet(
    $files, hive_partitioning = true, hive_types_autocast = false, union_by_name = true
)
)
