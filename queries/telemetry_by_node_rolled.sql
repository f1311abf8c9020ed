-- telemetry_by_node for a store that holds rolled-up telemetry (fleetaudit rollup):
-- rows without an alloc_id per node and ts (a rolled row's ts is its first sample),
-- each standing for its `samples` raw samples (a raw row, samples NULL, for one).
-- Output: node_id, ts, samples (BIGINT), sm_active_sum (DOUBLE), upper_samples (BIGINT:
-- those read from a series in $upper, which overstate SM activity).
SELECT node_id, ts,
       CAST(sum(coalesce(samples, 1)) AS BIGINT) AS samples,
       sum(sm_active * coalesce(samples, 1)) AS sm_active_sum,
       CAST(coalesce(sum(coalesce(samples, 1)) FILTER (WHERE list_contains($upper, metric)), 0)
            AS BIGINT) AS upper_samples
FROM telemetry
WHERE ts >= $start AND ts < $end AND alloc_id IS NULL
GROUP BY node_id, ts
ORDER BY node_id, ts
