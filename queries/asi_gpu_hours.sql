-- The day's GPU pod-hours with an SM reading, for telemetry: the run (alloc_id) each belongs
-- to, its first hour found as in asi_day_runs (t - rank is constant along a run).
SELECT node_id, t, alloc_id, ratio
FROM (
    SELECT server_id AS node_id, t, carried, avg_gpu_sm_util,
           pod_id || '@' || CAST(min(t0) OVER (
               PARTITION BY pod_id, server_id, gpu_request, cpu_request_cores, priority_class,
                            job_type_public, standby, grp
           ) AS VARCHAR) AS alloc_id,
           least(1.0, avg_gpu_sm_util / (gpu_request * 100)) AS ratio
    FROM (
        SELECT *, t - row_number() OVER (
            PARTITION BY pod_id, server_id, gpu_request, cpu_request_cores, priority_class,
                         job_type_public, standby
            ORDER BY t, t0
        ) AS grp
        FROM _asi_rows
        WHERE gpu_request > 0
    )
)
WHERE NOT carried AND avg_gpu_sm_util IS NOT NULL
