-- Telemetry samples in [$start, $end) counted two ways in one scan: per alloc_id (the
-- rows of telemetry_by_alloc) and per source series (those of telemetry_metrics).
-- Output: per_alloc (BOOLEAN: true for the alloc_id rows, false for the metric rows),
-- alloc_id, metric, samples (BIGINT), sm_active_sum (DOUBLE: the sum of sm_active),
-- upper_samples (BIGINT: the samples read from a series in $upper, which overstate SM
-- activity);
-- the alloc_id rows (with a NULL alloc_id: the samples that name none) by alloc_id,
-- then the metric rows most samples first.
SELECT GROUPING(metric) = 1 AS per_alloc, alloc_id, metric,
       count(*) AS samples, sum(sm_active) AS sm_active_sum,
       count(*) FILTER (WHERE list_contains($upper, metric)) AS upper_samples
FROM telemetry
WHERE ts >= $start AND ts < $end
GROUP BY GROUPING SETS ((alloc_id), (metric))
ORDER BY per_alloc DESC, alloc_id, samples DESC, metric NULLS FIRST
