-- The day's GPU pod-hours with an SM reading, for telemetry: the run (alloc_id) each belongs to.
SELECT node_id, t, alloc_id, ratio
FROM (
    SELECT server_id AS node_id, t, carried, avg_gpu_sm_util,
           pod_id || '@' || CAST(min(t0) OVER (
               PARTITION BY pod_id, server_id, gpu_request, cpu_request_cores, priority_class,
                            job_type_public, standby, grp
           ) AS VARCHAR) AS alloc_id,
           least(1.0, avg_gpu_sm_util / (gpu_request * 100)) AS ratio
    FROM _asi_rows
    WHERE gpu_request > 0
)
WHERE NOT carried AND avg_gpu_sm_util IS NOT NULL
