-- The recorded allocations active at some instant of [$start, $end), with the columns
-- fleetaudit's physical GPU-hours read (paper, one part of its window at a time), in no
-- particular order: those GPU-hours are whole GPU-microseconds summed in int64.
SELECT node_id, gpus, cpus, memory_gib, priority, start_time, end_time
FROM allocations_in($scenario)
WHERE start_time < $end AND (end_time IS NULL OR end_time > $start)
