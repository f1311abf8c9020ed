-- Rows per table and the time each table covers.
SELECT 'nodes' AS "table", count(*) AS "rows", NULL::TIMESTAMP AS first, NULL::TIMESTAMP AS last FROM nodes
UNION ALL
SELECT 'allocations', count(*), min(start_time), max(greatest(start_time, COALESCE(end_time, start_time))) FROM allocations
UNION ALL
SELECT 'requests', count(*), min(submit_time), max(greatest(submit_time, COALESCE(start_time, submit_time))) FROM requests
UNION ALL
SELECT 'telemetry', count(*), min(ts), max(ts) FROM telemetry
UNION ALL
SELECT 'node_events', count(*), min(start_time), max(greatest(start_time, COALESCE(end_time, start_time))) FROM node_events
UNION ALL
SELECT 'rejects', count(*), NULL, NULL FROM rejects
