-- Telemetry of the sleepable high-priority allocations of state $scenario
-- (NULL: recorded) over [$start, $end): one row per allocation and sample time,
-- with the busiest of its GPUs. A row is attributed by its alloc_id, a row
-- without one, to the sleepable allocations active on its node at ts.
-- Output: alloc_id, ts, sm_active, ordered by alloc_id and ts.
WITH sleepers AS (
    SELECT alloc_id, node_id, start_time, end_time
    FROM allocations_in($scenario)
    WHERE sleepable AND priority = 'high'
      AND start_time < $end AND (end_time IS NULL OR end_time > $start)
),
samples AS (
    SELECT ts, node_id, alloc_id, sm_active
    FROM telemetry
    WHERE ts >= $start AND ts < $end
),
attributed AS (
    SELECT s.alloc_id, t.ts, t.sm_active
    FROM samples AS t JOIN sleepers AS s ON t.alloc_id = s.alloc_id
    UNION ALL
    SELECT s.alloc_id, t.ts, t.sm_active
    FROM samples AS t JOIN sleepers AS s
      ON t.alloc_id IS NULL AND t.node_id = s.node_id
     AND t.ts >= s.start_time AND (s.end_time IS NULL OR t.ts < s.end_time)
)
SELECT alloc_id, ts, max(sm_active) AS sm_active
FROM attributed
GROUP BY alloc_id, ts
ORDER BY alloc_id, ts
