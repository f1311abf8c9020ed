-- The day's CPU-only pod-hours (93% of the rows) and the CPU-only runs carried over, grouped
-- straight from the files ($files) by the run's key: one hash aggregate, no sort, no
-- materialised pod-hours. A group whose hours are consecutive (n = span) is one run; the
-- few others are split by asi_cpu_runs.
CREATE OR REPLACE TEMP TABLE _asi_cpu_groups AS
SELECT pod_id, server_id, gpu_request, cpu_request_cores, priority_class,
       job_type_public, standby,
       min(t) AS t_min, max(t) AS t_last, count(*) AS n, min(t0) AS t_start,
       sum(gpu_hours) AS gpu_hours, arg_max(last_state, t) AS last_state,
       arg_min(workload_id, t) AS workload_id, arg_min(cluster_id, t) AS cluster_id,
       arg_min(model_type_public, t) AS model_type_public,
       arg_min(is_genai_request, t) AS is_genai_request,
       arg_min(schedule_delay_sec, t) AS schedule_delay_sec
FROM _asi_cpu_rows($files)
GROUP BY pod_id, server_id, gpu_request, cpu_request_cores, priority_class,
         job_type_public, standby
