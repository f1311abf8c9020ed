-- The recorded allocations that may be active at $at (start_time <= $at and no end_time
-- or end_time >= $at; node_state keeps those active at $at), for fleetaudit's shapes at one
-- snapshot of `paper`, in alloc_id order (rows sharing one: by all their columns), as
-- api.by_alloc_id puts them: a snapshot's rows are few enough to sort here.
SELECT alloc_id, job_id, node_id, gpus, cpus, memory_gib, priority, workload, tenant,
       start_time, end_time, checkpoint_interval_s, sleepable
FROM allocations_in($scenario)
WHERE start_time <= $at AND (end_time IS NULL OR end_time >= $at)
ORDER BY ALL
