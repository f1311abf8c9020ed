-- Requests of a report window's demand: those queued at some instant of [$start, $end]
-- (waiting by $end, not started before $start) and those submitted in it, with the
-- columns the demand and the queued GPUs read (the wait's times and a shape's).
-- A request waits for capacity from its eligible_time (else its submit_time); one with
-- an ineligible_reason and no eligible_time never does (held, waiting on another job):
-- submit_time below is that wait's start, and such requests are left out.
SELECT request_id, submit_time, start_time, gpu_model, gpus, gpus_per_pod, cpus_per_gpu,
       memory_gib_per_gpu, locality, duration_s
FROM (SELECT * REPLACE (CASE WHEN ineligible_reason IS NULL THEN COALESCE(eligible_time, submit_time) ELSE eligible_time END AS submit_time) FROM requests)
WHERE submit_time <= $end AND (start_time IS NULL OR start_time >= $start)
ORDER BY submit_time, request_id
