-- One day of server_hourly, with the HP CPU-only pods' totals per server-hour (the paper
-- counts their CPU request and rows; asi_pod_hourly keeps only GPU pods), and the GPUs all
-- pods request there (above gpu_count where LP work borrows a sleeping pod's GPUs); of the
-- server-hours the mapping takes (asi_server_rows: asi_server_rejects names the others).
SELECT s.t, s.server_id, s.cluster_id, s.asw_id, s.gpu_spec_public,
       s.gpu_count, s.cpu_capacity_cores,
       COALESCE(c.hp_cpu, 0) AS cpu_only_hp_cpu, COALESCE(c.hp_rows, 0) AS cpu_only_hp_rows,
       COALESCE(c.gpus, 0) AS requested_gpus
FROM (
    SELECT t, server_id, cluster_id, asw_id, gpu_spec_public, gpu_count, cpu_capacity_cores
    FROM _asi_server_rows
    WHERE fault IS NULL
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
