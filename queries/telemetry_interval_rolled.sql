-- telemetry_interval for a store that holds rolled-up telemetry (fleetaudit rollup):
-- the seconds one raw sample stands for, as the median over the rolled rows in
-- [$start, $end) of their raw cadence (sample_interval_s, known for rows of two or
-- more samples). NULL when no such row, and the caller then reads the raw rows' gaps.
-- Output: one row: interval_s (DOUBLE), series (BIGINT: GPUs looked at).
SELECT median(sample_interval_s) FILTER (WHERE sample_interval_s > 0) AS interval_s,
       count(DISTINCT (node_id, gpu_index)) FILTER (WHERE sample_interval_s > 0) AS series
FROM telemetry
WHERE ts >= $start AND ts < $end
