-- telemetry_by_alloc for a store that holds rolled-up telemetry (fleetaudit rollup):
-- a row stands for its `samples` raw samples with the mean sm_active, a raw row
-- (samples NULL) for one. Rows whose first sample is in [$start, $end), per alloc_id.
-- Output: alloc_id, samples (BIGINT), sm_active_sum (DOUBLE: the sum of sm_active),
-- upper_samples (BIGINT: those read from a series in $upper, which overstate SM activity).
SELECT alloc_id,
       CAST(sum(coalesce(samples, 1)) AS BIGINT) AS samples,
       sum(sm_active * coalesce(samples, 1)) AS sm_active_sum,
       CAST(coalesce(sum(coalesce(samples, 1)) FILTER (WHERE list_contains($upper, metric)), 0)
            AS BIGINT) AS upper_samples
FROM telemetry
WHERE ts >= $start AND ts < $end AND alloc_id IS NOT NULL
GROUP BY alloc_id
ORDER BY alloc_id
