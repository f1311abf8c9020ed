-- Requests submitted in [$start, $end], with their shape columns and start time
-- (calibration compares their real waits with the predicted ones), in no
-- particular order: the calibration's percentiles do not depend on it.
SELECT request_id, submit_time, start_time, gpu_model, gpus, gpus_per_pod, cpus_per_gpu,
       memory_gib_per_gpu, locality, duration_s
FROM requests
WHERE submit_time >= $start AND submit_time <= $end
