-- Telemetry samples in [$start, $end) that name their allocation, per alloc_id.
-- Output: alloc_id, samples (BIGINT), sm_active_sum (DOUBLE: the sum of sm_active).
SELECT alloc_id, count(*) AS samples, sum(sm_active) AS sm_active_sum
FROM telemetry
WHERE ts >= $start AND ts < $end AND alloc_id IS NOT NULL
GROUP BY alloc_id
ORDER BY alloc_id
