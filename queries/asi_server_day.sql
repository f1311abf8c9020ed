-- One day of server_hourly, with the HP CPU-only pods' totals per server-hour (the paper
-- counts their CPU request and rows; asi_pod_hourly keeps only GPU pods), and the GPUs all
-- pods request there (above gpu_count where LP work borrows a sleeping pod's GPUs).
SELECT s.t, s.server_id, s.cluster_id, s.asw_id, s.gpu_spec_public,
       CAST(s.gpu_count AS DOUBLE) AS gpu_count,
       CAST(s.cpu_capacity_cores AS DOUBLE) AS cpu_capacity_cores,
       COALESCE(c.hp_cpu, 0) AS cpu_only_hp_cpu, COALESCE(c.hp_rows, 0) AS cpu_only_hp_rows,
       COALESCE(c.gpus, 0) AS requested_gpus
FROM (
    SELECT CAST(day AS INTEGER) * 24 + CAST(hour AS INTEGER) AS t, server_id, cluster_id,
           asw_id, gpu_spec_public, gpu_count, cpu_capacity_cores
    FROM read_parquet($files, hive_partitioning = true, hive_types_autocast = false,
                      union_by_name = true)
    WHERE server_id IS NOT NULL
) AS s
LEFT JOIN (
    SELECT t, server_id,
           sum(cpu_request_cores) FILTER (WHERE priority_class = 'HP' AND NOT gpu_request > 0)
               AS hp_cpu,
           count(*) FILTER (WHERE priority_class = 'HP' AND NOT gpu_request > 0) AS hp_rows,
           sum(gpu_request) FILTER (WHERE gpu_request > 0) AS gpus
    FROM _asi_day
    WHERE server_id IS NOT NULL
    GROUP BY t, server_id
) AS c USING (t, server_id)
