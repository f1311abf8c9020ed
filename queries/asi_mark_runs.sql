-- The day's pod-hours and the runs carried over from the day before (_asi_open), as one
-- view: the input of the run rule (asi_runs). A carried run is one row at its last
-- hour (t, the end of the block before; t0, its first hour), so that the block's next hour
-- continues it; its GPU-hours and strings are the run's so far. rid tells the rows apart
-- (any integer unique among them does; here the row's rowid, negative for a carried run:
-- DuckDB's own on its table _asi_day, a column of that name on Spark's, which numbers the
-- rows with monotonically_increasing_id): asi_run_strings takes a run's strings from the
-- rows asi_runs names by rid. Each engine keeps this SELECT as the view _asi_rows.
-- Portable: both engines run this text (on Spark, _asi_open is empty: one block).
SELECT pod_id, server_id, t, t AS t0, gpu_request, cpu_request_cores, priority_class,
       job_type_public, state_public IS NOT DISTINCT FROM 'Standby' AS standby,
       used_gpu_hours AS gpu_hours, state_public AS last_state, workload_id, cluster_id,
       model_type_public, is_genai_request, schedule_delay_sec, avg_gpu_sm_util,
       FALSE AS carried, rowid AS rid
FROM _asi_day
WHERE pod_id IS NOT NULL AND server_id IS NOT NULL
UNION ALL
SELECT pod_id, server_id, t_last, t_start, gpu_request, cpu_request_cores, priority_class,
       job_type_public, standby, gpu_hours, last_state, workload_id, cluster_id,
       model_type_public, is_genai_request, schedule_delay_sec, NULL, TRUE, -1 - rowid
FROM _asi_open
