-- Health intervals (node_events) that meet [$start, $end), and every open one: an open
-- interval dates its node's recorded health whatever the window (capacity.health_of).
-- Output: node_id, gpu_index, start_time, end_time, state, reason, source; in no
-- particular order (health_of sorts them).
SELECT node_id, gpu_index, start_time, end_time, state, reason, source
FROM node_events
WHERE end_time IS NULL OR (start_time < $end AND end_time > $start)
