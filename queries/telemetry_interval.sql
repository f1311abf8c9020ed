-- The seconds one telemetry sample stands for in [$start, $end): the median gap
-- between consecutive samples of the same GPU (node_id, gpu_index). interval_s
-- is NULL when no GPU has two samples.
-- Output: one row: interval_s (DOUBLE), series (BIGINT: GPUs with a sample),
-- samples (BIGINT).
SELECT median(gap_s) FILTER (WHERE gap_s > 0) AS interval_s,
       count(DISTINCT (node_id, gpu_index)) AS series,
       count(*) AS samples
FROM (
    SELECT node_id, gpu_index,
           epoch(ts) - epoch(lag(ts) OVER (PARTITION BY node_id, gpu_index ORDER BY ts)) AS gap_s
    FROM telemetry
    WHERE ts >= $start AND ts < $end
)
