-- Every request that waits for capacity, with its extra columns (a placement what-if
-- feeds them in trace_order when the file had one, else by submit_time then request_id).
-- A request waits for capacity from its eligible_time (else its submit_time); one with
-- an ineligible_reason and no eligible_time never does (held, waiting on another job):
-- submit_time below is that wait's start, and such requests are left out.
SELECT * EXCLUDE (_ingest_id)
FROM (SELECT * REPLACE (CASE WHEN ineligible_reason IS NULL THEN COALESCE(eligible_time, submit_time) ELSE eligible_time END AS submit_time) FROM requests)
WHERE submit_time IS NOT NULL
ORDER BY submit_time, request_id
