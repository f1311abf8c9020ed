-- The runs that ended (or the last day's runs) as native allocation rows (README, "The
-- alibaba-gpu-v2026 trace"). $t_first, $t_last: the first and last hour ingested.
SELECT
    pod_id || '@' || CAST(t_start AS VARCHAR) AS alloc_id,
    pod_id AS job_id,
    server_id AS node_id,
    gpu_request AS gpus,
    cpu_request_cores AS cpus,
    CAST(NULL AS DOUBLE) AS memory_gib,
    CASE WHEN priority_class = 'HP' THEN 'high' ELSE 'low' END AS priority,
    CASE WHEN gpu_request <= 0 THEN 'cpu_only'
         WHEN job_type_public IN ('training', 'online_inference', 'offline_inference')
             THEN job_type_public
         WHEN job_type_public = 'dev' THEN 'development'
         ELSE 'other' END AS workload,
    CAST(NULL AS VARCHAR) AS tenant,
    $trace_start + to_hours(CAST(t_start AS BIGINT)) AS start_time,
    CASE WHEN t_last < $t_last THEN $trace_start + to_hours(CAST(t_last + 1 AS BIGINT)) END
        AS end_time,
    CAST(NULL AS DOUBLE) AS checkpoint_interval_s,
    standby AS sleepable,
    workload_id, cluster_id, priority_class, job_type_public, model_type_public,
    is_genai_request, last_state AS asi_state, gpu_hours,
    t_start = $t_first AS left_censored, schedule_delay_sec,
    t_start AS _row
FROM _asi_runs
WHERE t_last < $day_end OR $last_day
ORDER BY server_id, t_start, pod_id
