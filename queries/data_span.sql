-- The first and last timestamps in the data (allocations of the scenario, requests,
-- telemetry), and how many allocations and requests there are. One row.
SELECT least(
           (SELECT min(start_time) FROM allocations_in($scenario)),
           (SELECT min(submit_time) FROM requests),
           (SELECT min(ts) FROM telemetry)
       ) AS "first",
       greatest(
           (SELECT max(greatest(start_time, COALESCE(end_time, start_time))) FROM allocations_in($scenario)),
           (SELECT max(greatest(submit_time, COALESCE(start_time, submit_time))) FROM requests),
           (SELECT max(ts) FROM telemetry)
       ) AS "last",
       (SELECT count(*) FROM allocations_in($scenario)) AS allocations,
       (SELECT count(*) FROM requests) AS requests
