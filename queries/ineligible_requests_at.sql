-- Requests submitted by $at, not started by then, that are not queued demand at $at
-- because they may not start yet for reasons of their own (ineligible_reason: held,
-- waiting on another job, before their begin time), counted per reason.
-- Output: ineligible_reason, requests; most first.
SELECT ineligible_reason, count(*) AS requests
FROM requests
WHERE ineligible_reason IS NOT NULL
  AND submit_time <= $at
  AND (start_time IS NULL OR start_time > $at)
  AND (eligible_time IS NULL OR eligible_time > $at)
GROUP BY ineligible_reason
ORDER BY requests DESC, ineligible_reason
