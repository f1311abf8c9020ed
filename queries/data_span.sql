-- The first and last timestamps in the data (allocations of the scenario, requests,
-- telemetry), and how many allocations and requests there are. One row.
-- Plain min()/max()/count(*) of each column, so DuckDB answers them from its column
-- statistics without a scan; the recorded allocations are read directly, only a saved
-- scenario goes through allocations_in (whose union hides the statistics).
WITH recorded AS (
    SELECT min(start_time) AS "first", greatest(max(start_time), max(end_time)) AS "last",
           count(*) AS allocations
    FROM allocations
    WHERE $scenario IS NULL
), saved AS (
    SELECT min(start_time) AS "first", greatest(max(start_time), max(end_time)) AS "last",
           count(*) AS allocations
    FROM allocations_in($scenario)
    WHERE $scenario IS NOT NULL
), state AS (
    SELECT * FROM recorded WHERE $scenario IS NULL
    UNION ALL
    SELECT * FROM saved WHERE $scenario IS NOT NULL
)
SELECT least(
           (SELECT "first" FROM state),
           (SELECT min(submit_time) FROM requests),
           (SELECT min(ts) FROM telemetry)
       ) AS "first",
       greatest(
           (SELECT "last" FROM state),
           (SELECT greatest(max(submit_time), max(start_time)) FROM requests),
           (SELECT max(ts) FROM telemetry)
       ) AS "last",
       (SELECT allocations FROM state) AS allocations,
       (SELECT count(*) FROM requests) AS requests
