-- One day of server_hourly, with the HP CPU-only pods' totals per server-hour (the paper
-- counts their CPU request and rows; asi_pod_hourly keeps only GPU pods).
SELECT s.t, s.server_id, s.cluster_id, s.asw_id, s.gpu_spec_public,
       CAST(s.gpu_count AS DOUBLE) AS gpu_count,
       CAST(s.cpu_capacity_cores AS DOUBLE) AS cpu_capacity_cores,
       COALESCE(c.hp_cpu, 0) AS cpu_only_hp_cpu, COALESCE(c.hp_rows, 0) AS cpu_only_hp_rows
FROM (
    SELECT CAST(day AS INTEGER) * 24 + CAST(hour AS INTEGER) AS t, server_id, cluster_id,
           asw_id, gpu_spec_public, gpu_count, cpu_capacity_cores
    FROM read_parquet($files, hive_partitioning = true, hive_types_autocast = false,
                      union_by_name = true)
    WHERE server_id IS NOT NULL
) AS s
LEFT JOIN (
    SELECT t, server_id, sum(cpu_request_cores) AS hp_cpu, count(*) AS hp_rows
    FROM _asi_day
    WHERE priority_class = 'HP' AND NOT gpu_request > 0 AND server_id IS NOT NULL
    GROUP BY t, server_id
) AS c USING (t, server_id)
