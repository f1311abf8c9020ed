-- The day's pod-hours and the runs carried over from the day before (_asi_open), as one
-- view. A run is the consecutive hours of one pod on one server with the same GPU and CPU
-- request, priority, job type and Standby flag (README, "The alibaba-gpu-v2026 trace").
-- k packs (hour, row) into one integer, t << 40 | rid, where rid is the row's rowid in
-- _asi_day, or 2^39 + its rowid in _asi_open for a carried run: asi_day_runs finds a
-- run's first and last rows by a min/max of k and fetches their strings by rid after.
-- h is one 64-bit hash of the seven run keys (asi_day_runs groups by it; asi_load_day
-- stores it for the block's rows); h2 hashes them in the reverse order, to check that no
-- two keys share an h.
CREATE OR REPLACE TEMP VIEW _asi_rows AS
SELECT pod_id, server_id, t, t0, gpu_request, cpu_request_cores, priority_class,
       job_type_public, standby, gpu_hours, last_state, workload_id, cluster_id,
       model_type_public, is_genai_request, schedule_delay_sec, avg_gpu_sm_util, carried, k,
       h,
       hash(standby, job_type_public, priority_class, cpu_request_cores, gpu_request,
            server_id, pod_id) AS h2
FROM (
    SELECT pod_id, server_id, t, t AS t0, gpu_request, cpu_request_cores, priority_class,
           job_type_public, state_public IS NOT DISTINCT FROM 'Standby' AS standby,
           used_gpu_hours AS gpu_hours, state_public AS last_state, workload_id, cluster_id,
           model_type_public, is_genai_request, schedule_delay_sec, avg_gpu_sm_util,
           FALSE AS carried, (CAST(t AS BIGINT) << 40) | rowid AS k, h
    FROM _asi_day
    WHERE pod_id IS NOT NULL AND server_id IS NOT NULL
    UNION ALL
    SELECT pod_id, server_id, t_last, t_start, gpu_request, cpu_request_cores, priority_class,
           job_type_public, standby, gpu_hours, last_state, workload_id, cluster_id,
           model_type_public, is_genai_request, schedule_delay_sec, NULL, TRUE,
           (CAST(t_last AS BIGINT) << 40) | (549755813888 + rowid),
           hash(pod_id, server_id, gpu_request, cpu_request_cores, priority_class,
                job_type_public, standby)
    FROM _asi_open
)
