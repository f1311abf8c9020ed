-- Telemetry samples in [$start, $end) without an alloc_id, per node and instant
-- (the report shares them among the GPU allocations active there and then).
-- Output: node_id, ts, samples (BIGINT), sm_active_sum (DOUBLE), upper_samples (BIGINT:
-- those read from a series in $upper, which overstate SM activity).
SELECT node_id, ts, count(*) AS samples, sum(sm_active) AS sm_active_sum,
       count(*) FILTER (WHERE list_contains($upper, metric)) AS upper_samples
FROM telemetry
WHERE ts >= $start AND ts < $end AND alloc_id IS NULL
GROUP BY node_id, ts
ORDER BY node_id, ts
