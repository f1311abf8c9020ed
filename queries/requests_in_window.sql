-- Requests of a report window's demand: those queued at some instant of [$start, $end]
-- (submitted by $end, not started before $start) and those submitted in it, with the
-- columns the demand and the queued GPUs read (the wait's times and a shape's).
SELECT request_id, submit_time, start_time, gpu_model, gpus, gpus_per_pod, cpus_per_gpu,
       memory_gib_per_gpu, locality, duration_s
FROM requests
WHERE submit_time <= $end AND (start_time IS NULL OR start_time >= $start)
ORDER BY submit_time, request_id
