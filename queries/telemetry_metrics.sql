-- Where the telemetry samples in [$start, $end) came from: the series each row's
-- sm_active was read from (telemetry.metric; NULL: given as sm_active).
-- Output: metric (VARCHAR), samples (BIGINT), most samples first.
SELECT metric, count(*) AS samples
FROM telemetry
WHERE ts >= $start AND ts < $end
GROUP BY metric
ORDER BY samples DESC, metric NULLS FIRST
