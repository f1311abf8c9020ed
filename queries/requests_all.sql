-- Every request with its extra columns (a placement what-if feeds them in
-- trace_order when the file had one, else by submit_time then request_id).
SELECT * EXCLUDE (_ingest_id)
FROM requests
ORDER BY submit_time, request_id
