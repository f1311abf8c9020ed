-- The paper's per-server-hour record over trace hours [$lo, $hi]: every server_hourly row
-- with its GPU pods' sums (asi_pod_hourly) and its HP CPU-only pods' totals.
SELECT
    s.t, s.server_id, s.cluster_id, s.asw_id, s.gpu_model,
    COALESCE(s.gpu_count, 0) AS gpu_count,
    COALESCE(s.cpu_capacity_cores, 0) AS cpu_capacity_cores,
    COALESCE(p.hp_active, 0) AS hp_active,
    COALESCE(p.hp_standby, 0) AS hp_standby,
    COALESCE(p.lp_alloc, 0) AS lp_alloc,
    COALESCE(p.hp_lp_active, 0) AS hp_lp_active,
    COALESCE(p.requested_cpu_hp, 0) + COALESCE(s.cpu_only_hp_cpu, 0) AS requested_cpu_hp,
    COALESCE(p.requested_gpu_hp, 0) AS requested_gpu_hp,
    COALESCE(p.hp_pod_rows, 0) + COALESCE(s.cpu_only_hp_rows, 0) AS hp_pod_rows
FROM asi_server_hourly AS s
LEFT JOIN (
    SELECT t, server_id,
        sum(used_gpu_hours) FILTER (WHERE priority_class = 'HP'
            AND state_public IS DISTINCT FROM 'Standby') AS hp_active,
        sum(used_gpu_hours) FILTER (WHERE priority_class = 'HP'
            AND state_public = 'Standby') AS hp_standby,
        sum(used_gpu_hours) FILTER (WHERE priority_class = 'LP') AS lp_alloc,
        sum(used_gpu_hours) FILTER (WHERE priority_class IN ('HP', 'LP')
            AND state_public IS DISTINCT FROM 'Standby') AS hp_lp_active,
        sum(cpu_request_cores) FILTER (WHERE priority_class = 'HP') AS requested_cpu_hp,
        sum(gpu_request) FILTER (WHERE priority_class = 'HP') AS requested_gpu_hp,
        count(*) FILTER (WHERE priority_class = 'HP') AS hp_pod_rows
    FROM asi_pod_hourly
    WHERE t BETWEEN $lo AND $hi
    GROUP BY t, server_id
) AS p USING (t, server_id)
WHERE s.t BETWEEN $lo AND $hi
ORDER BY s.t, s.server_id
