-- The runs touching the day, from _asi_rows. Hours with equal (pod, server, request,
-- priority, job type, Standby) that are consecutive form one run. Most such groups are
-- one unbroken run (count = span), found by a hash aggregate; only the pod-servers with a
-- broken group are ranked (t - rank is constant along a run) and grouped again.
CREATE OR REPLACE TEMP TABLE _asi_runs AS
WITH groups AS (
    SELECT pod_id, server_id, gpu_request, cpu_request_cores, priority_class,
           job_type_public, standby,
           min(t) AS t_min, max(t) AS t_last, count(*) AS n, min(t0) AS t_start,
           sum(gpu_hours) AS gpu_hours, arg_max(last_state, t) AS last_state,
           arg_min(workload_id, t) AS workload_id, arg_min(cluster_id, t) AS cluster_id,
           arg_min(model_type_public, t) AS model_type_public,
           arg_min(is_genai_request, t) AS is_genai_request,
           arg_min(schedule_delay_sec, t) AS schedule_delay_sec
    FROM _asi_rows
    GROUP BY pod_id, server_id, gpu_request, cpu_request_cores, priority_class,
             job_type_public, standby
),
broken_pairs AS (
    SELECT DISTINCT pod_id, server_id FROM groups WHERE n <> t_last - t_min + 1
),
broken AS (
    SELECT r.*,
        r.t - row_number() OVER (
            PARTITION BY r.pod_id, r.server_id, r.gpu_request, r.cpu_request_cores,
                         r.priority_class, r.job_type_public, r.standby
            ORDER BY r.t, r.t0
        ) AS grp
    FROM _asi_rows AS r
    SEMI JOIN broken_pairs AS b ON r.pod_id = b.pod_id AND r.server_id = b.server_id
)
SELECT g.pod_id, g.server_id, g.t_start, g.t_last, g.gpu_request, g.cpu_request_cores,
       g.priority_class, g.job_type_public, g.standby, g.gpu_hours, g.last_state,
       g.workload_id, g.cluster_id, g.model_type_public, g.is_genai_request,
       g.schedule_delay_sec
FROM groups AS g
ANTI JOIN broken_pairs AS b ON g.pod_id = b.pod_id AND g.server_id = b.server_id
UNION ALL
SELECT pod_id, server_id, min(t0), max(t), gpu_request, cpu_request_cores, priority_class,
       job_type_public, standby, sum(gpu_hours), arg_max(last_state, t),
       arg_min(workload_id, t), arg_min(cluster_id, t), arg_min(model_type_public, t),
       arg_min(is_genai_request, t), arg_min(schedule_delay_sec, t)
FROM broken
GROUP BY pod_id, server_id, gpu_request, cpu_request_cores, priority_class, job_type_public,
         standby, grp
