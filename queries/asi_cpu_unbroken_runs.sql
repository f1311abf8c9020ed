-- The CPU-only runs into _asi_runs when no group of asi_cpu_groups is broken: each group
-- is one run (asi_cpu_runs handles the other case).
INSERT INTO _asi_runs
SELECT pod_id, server_id, t_start, t_last, gpu_request, cpu_request_cores, priority_class,
       job_type_public, standby, gpu_hours, last_state, workload_id, cluster_id,
       model_type_public, is_genai_request, schedule_delay_sec
FROM _asi_cpu_groups
