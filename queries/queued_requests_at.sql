-- Requests queued at $at: submitted by then, not started by then (SPEC §3).
SELECT request_id, submit_time, start_time, gpu_model, gpus, gpus_per_pod, cpus_per_gpu,
       memory_gib_per_gpu, cpus, memory_gib, locality, duration_s, start_deadline_s,
       priority, tenant
FROM requests
WHERE submit_time <= $at AND (start_time IS NULL OR start_time > $at)
ORDER BY submit_time, request_id
