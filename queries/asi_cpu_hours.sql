-- The HP CPU-only pods' totals per server-hour (the paper counts their CPU request and rows),
-- straight from the day's pod partition files ($files).
CREATE OR REPLACE TEMP TABLE _asi_cpu_hours AS
SELECT t, server_id, sum(cpu_request_cores) AS hp_cpu, count(*) AS hp_rows
FROM _asi_pods($files)
WHERE NOT gpu_request > 0 AND priority_class = 'HP' AND server_id IS NOT NULL
GROUP BY t, server_id
