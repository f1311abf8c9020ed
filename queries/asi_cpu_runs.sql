-- The CPU-only runs into _asi_runs (after asi_day_runs wrote the GPU runs): the unbroken
-- groups of asi_cpu_groups as they are; the pod-servers with a broken group are read again
-- from the files ($files) and ranked as in asi_day_runs (t - rank is constant along a run).
INSERT INTO _asi_runs
WITH broken_pairs AS (
    SELECT DISTINCT pod_id, server_id FROM _asi_cpu_groups WHERE n <> t_last - t_min + 1
),
broken AS (
    SELECT r.*,
        r.t - row_number() OVER (
            PARTITION BY r.pod_id, r.server_id, r.gpu_request, r.cpu_request_cores,
                         r.priority_class, r.job_type_public, r.standby
            ORDER BY r.t, r.t0
        ) AS grp
    FROM _asi_cpu_rows($files) AS r
    SEMI JOIN broken_pairs AS b ON r.pod_id = b.pod_id AND r.server_id = b.server_id
)
SELECT g.pod_id, g.server_id, g.t_start, g.t_last, g.gpu_request, g.cpu_request_cores,
       g.priority_class, g.job_type_public, g.standby, g.gpu_hours, g.last_state,
       g.workload_id, g.cluster_id, g.model_type_public, g.is_genai_request,
       g.schedule_delay_sec
FROM _asi_cpu_groups AS g
ANTI JOIN broken_pairs AS b ON g.pod_id = b.pod_id AND g.server_id = b.server_id
UNION ALL
SELECT pod_id, server_id, min(t0), max(t), gpu_request, cpu_request_cores, priority_class,
       job_type_public, standby, sum(gpu_hours), arg_max(last_state, t),
       arg_min(workload_id, t), arg_min(cluster_id, t), arg_min(model_type_public, t),
       arg_min(is_genai_request, t), arg_min(schedule_delay_sec, t)
FROM broken
GROUP BY pod_id, server_id, gpu_request, cpu_request_cores, priority_class, job_type_public,
         standby, grp
