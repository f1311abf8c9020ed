-- Where the telemetry samples in [$start, $end) came from, for a store that holds
-- rolled-up (or sample-counted) telemetry: the series each row's sm_active was read
-- from (telemetry.metric; NULL: given as sm_active), a row counting as its `samples`
-- raw samples (one without a count as one).
-- Output: metric (VARCHAR), samples (BIGINT), most samples first.
SELECT metric, CAST(sum(coalesce(samples, 1)) AS BIGINT) AS samples
FROM telemetry
WHERE ts >= $start AND ts < $end
GROUP BY metric
ORDER BY samples DESC, metric NULLS FIRST
