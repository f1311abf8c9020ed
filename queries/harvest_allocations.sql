-- The allocations of the state $scenario (NULL: recorded) that whatif harvesting
-- replays: those active at some instant of [$start, $end), with the columns the
-- replay and the sleep detection read (not workload or tenant: two string columns
-- of millions of rows on a month of a large fleet, read and sorted for nothing).
-- In no particular order: api.by_alloc_id puts them in alloc_id order.
SELECT alloc_id, job_id, node_id, gpus, cpus, memory_gib, priority,
       start_time, end_time, checkpoint_interval_s, sleepable
FROM allocations_in($scenario)
WHERE start_time < $end AND (end_time IS NULL OR end_time > $start)
