-- The pruned GPU pod-hours that `paper` reads (table asi_pod_hourly).
SELECT t, pod_id, server_id, state_public, priority_class, job_type_public, gpu_request,
       cpu_request_cores, used_gpu_hours, avg_gpu_sm_util, ready_status
FROM _asi_day
WHERE server_id IS NOT NULL AND gpu_request > 0
