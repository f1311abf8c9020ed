-- The seconds one telemetry sample stands for in [$start, $end): the median gap
-- between consecutive samples of the same GPU (node_id, gpu_index), over the GPUs
-- of at most 256 nodes (those with the smallest hash(node_id): a fixed sample that
-- keeps the window function small on a fleet-sized table). NULL when no GPU of
-- them has two samples.
-- Output: one row: interval_s (DOUBLE), series (BIGINT: GPUs looked at).
WITH sampled_nodes AS (
    SELECT node_id
    FROM (SELECT DISTINCT node_id FROM telemetry WHERE ts >= $start AND ts < $end)
    ORDER BY hash(node_id), node_id
    LIMIT 256
), gaps AS (
    SELECT t.node_id, t.gpu_index,
           epoch(t.ts) - epoch(lag(t.ts) OVER (PARTITION BY t.node_id, t.gpu_index ORDER BY t.ts)) AS gap_s
    FROM telemetry AS t
    SEMI JOIN sampled_nodes AS s ON t.node_id = s.node_id
    WHERE t.ts >= $start AND t.ts < $end
)
SELECT median(gap_s) FILTER (WHERE gap_s > 0) AS interval_s,
       count(DISTINCT (node_id, gpu_index)) AS series
FROM gaps
