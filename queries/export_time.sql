-- The export time: the latest timestamp in the data (SPEC §2), or NULL when empty.
-- Output: one row, one column "at" (TIMESTAMP).
SELECT greatest(
    (SELECT max(greatest(start_time, COALESCE(end_time, start_time))) FROM allocations_in($scenario)),
    (SELECT max(greatest(submit_time, COALESCE(start_time, submit_time))) FROM requests),
    (SELECT max(ts) FROM telemetry)
) AS "at"
