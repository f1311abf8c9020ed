-- Runs still going at the day's last hour: the next day may continue them.
CREATE OR REPLACE TEMP TABLE _asi_open AS
SELECT pod_id, server_id, t_start, t_last, gpu_request, cpu_request_cores, priority_class,
       job_type_public, standby, gpu_hours, last_state, workload_id, cluster_id,
       model_type_public, is_genai_request, schedule_delay_sec
FROM _asi_runs
WHERE t_last = $day_end AND NOT $last_day
