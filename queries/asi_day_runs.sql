-- The runs touching the day: one row per run, from _asi_rows.
CREATE OR REPLACE TEMP TABLE _asi_runs AS
SELECT
    pod_id, server_id, min(t0) AS t_start, max(t) AS t_last,
    gpu_request, cpu_request_cores, priority_class, job_type_public, standby,
    sum(gpu_hours) AS gpu_hours,
    arg_max(last_state, t) AS last_state,
    arg_min(workload_id, t) AS workload_id, arg_min(cluster_id, t) AS cluster_id,
    arg_min(model_type_public, t) AS model_type_public,
    arg_min(is_genai_request, t) AS is_genai_request,
    arg_min(schedule_delay_sec, t) AS schedule_delay_sec
FROM _asi_rows
GROUP BY pod_id, server_id, gpu_request, cpu_request_cores, priority_class, job_type_public,
         standby, grp
