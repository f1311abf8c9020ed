-- The day's GPU runs, for the GPU-index colouring of telemetry.
SELECT server_id AS node_id, pod_id || '@' || CAST(t_start AS VARCHAR) AS alloc_id,
       t_start, t_last, gpu_request AS gpus, standby AS sleepable
FROM _asi_runs
WHERE gpu_request > 0
ORDER BY t_start, server_id, gpu_request DESC, alloc_id
