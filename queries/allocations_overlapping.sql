-- Allocations of the state $scenario (NULL: recorded) active at some instant of
-- [$start, $end): start_time < $end and (no end_time or end_time > $start).
-- In no particular order: sorting 9.4 M rows here doubles the read's memory;
-- api.load_frames puts them in alloc_id order.
SELECT alloc_id, job_id, node_id, gpus, cpus, memory_gib, priority, workload, tenant,
       start_time, end_time, checkpoint_interval_s, sleepable
FROM allocations_in($scenario)
WHERE start_time < $end AND (end_time IS NULL OR end_time > $start)
