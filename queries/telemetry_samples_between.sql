-- How much telemetry covers [$start, $end): rows, and their first and last ts.
-- Output: one row: samples (BIGINT), first, last (TIMESTAMP, NULL without rows).
SELECT count(*) AS samples, min(ts) AS "first", max(ts) AS "last"
FROM telemetry
WHERE ts >= $start AND ts < $end
