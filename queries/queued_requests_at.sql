-- Requests queued at $at: waiting by then, not started by then (SPEC §3).
-- A request waits for capacity from its eligible_time (else its submit_time); one with
-- an ineligible_reason and no eligible_time never does (held, waiting on another job):
-- submit_time below is that wait's start, and such requests are left out.
SELECT request_id, submit_time, start_time, gpu_model, gpus, gpus_per_pod, cpus_per_gpu,
       memory_gib_per_gpu, cpus, memory_gib, locality, duration_s, start_deadline_s,
       priority, tenant
FROM (SELECT * REPLACE (CASE WHEN ineligible_reason IS NULL THEN COALESCE(eligible_time, submit_time) ELSE eligible_time END AS submit_time) FROM requests)
WHERE submit_time <= $at AND (start_time IS NULL OR start_time > $at)
ORDER BY submit_time, request_id
