-- The day's GPU pod-hours with an SM reading, for telemetry: the run (alloc_id) each belongs to.
SELECT server_id AS node_id, t, pod_id || '@' || CAST(t_start AS VARCHAR) AS alloc_id,
       least(1.0, avg_gpu_sm_util / (gpu_request * 100)) AS ratio
FROM _asi_rows
WHERE NOT carried AND gpu_request > 0 AND avg_gpu_sm_util IS NOT NULL
