-- The (empty) carry-over of runs between days, and the pod partitions' scans: _asi_pods
-- prunes a day's files to the adapter's columns, typed, with the trace hour t (nulls become
-- 0 where the paper's scripts coerce them); _asi_cpu_rows is its CPU-only pod-hours with an
-- id and the CPU-only runs carried from the day before, as rows of the run collapse.
CREATE OR REPLACE TEMP TABLE _asi_open (
    pod_id VARCHAR, server_id VARCHAR, t_start INTEGER, t_last INTEGER, gpu_request DOUBLE,
    cpu_request_cores DOUBLE, priority_class VARCHAR, job_type_public VARCHAR, standby BOOLEAN,
    gpu_hours DOUBLE, last_state VARCHAR, workload_id VARCHAR, cluster_id VARCHAR,
    model_type_public VARCHAR, is_genai_request BOOLEAN, schedule_delay_sec BIGINT
);
CREATE OR REPLACE TEMP MACRO _asi_pods(files) AS TABLE
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
    files, hive_partitioning = true, hive_types_autocast = false, union_by_name = true
);
CREATE OR REPLACE TEMP MACRO _asi_cpu_rows(files) AS TABLE
SELECT pod_id, server_id, t, t AS t0, gpu_request, cpu_request_cores, priority_class,
       job_type_public, state_public IS NOT DISTINCT FROM 'Standby' AS standby,
       used_gpu_hours AS gpu_hours, state_public AS last_state, workload_id, cluster_id,
       model_type_public, is_genai_request, schedule_delay_sec
FROM _asi_pods(files)
WHERE NOT gpu_request > 0 AND pod_id IS NOT NULL AND server_id IS NOT NULL
UNION ALL
SELECT pod_id, server_id, t_last, t_start, gpu_request, cpu_request_cores, priority_class,
       job_type_public, standby, gpu_hours, last_state, workload_id, cluster_id,
       model_type_public, is_genai_request, schedule_delay_sec
FROM _asi_open
WHERE NOT gpu_request > 0;
