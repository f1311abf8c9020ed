-- The export time: the latest timestamp in the data (SPEC §2), or NULL when empty.
-- Output: one row, one column "at" (TIMESTAMP).
-- Plain max() of each column (NULLs ignored), so DuckDB answers them from its column
-- statistics without a scan; the recorded allocations are read directly, only a saved
-- scenario goes through allocations_in (whose union hides the statistics).
SELECT greatest(
    (SELECT greatest(max(start_time), max(end_time)) FROM allocations WHERE $scenario IS NULL),
    (SELECT greatest(max(start_time), max(end_time)) FROM allocations_in($scenario)
     WHERE $scenario IS NOT NULL),
    (SELECT greatest(max(submit_time), max(start_time)) FROM requests),
    (SELECT max(ts) FROM telemetry)
) AS "at"
