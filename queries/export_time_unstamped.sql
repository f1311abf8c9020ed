-- The newest time among the recorded rows of the ingest calls whose exports did not say
-- when they were taken (the rows of a call that did are covered by its own time: a time
-- after it lies in that export's future). Allocation starts and ends, request submit and
-- start times (an eligible time is not an event), telemetry samples.
-- Output: one row, one column "at" (TIMESTAMP; NULL when no such row).
WITH stamped AS (SELECT DISTINCT ingest_id FROM exports)
SELECT greatest(
    (SELECT greatest(max(start_time), max(end_time)) FROM allocations
     WHERE _ingest_id NOT IN (SELECT ingest_id FROM stamped)),
    (SELECT greatest(max(submit_time), max(start_time)) FROM requests
     WHERE _ingest_id NOT IN (SELECT ingest_id FROM stamped)),
    (SELECT max(ts) FROM telemetry WHERE _ingest_id NOT IN (SELECT ingest_id FROM stamped))
) AS "at"
