-- The day's pod-hours and the runs carried over from the day before (_asi_open), cut into
-- runs: a run continues while the next hour has the same pod, server, GPU and CPU request,
-- priority, job type and Standby flag (README, "The alibaba-gpu-v2026 trace").
CREATE OR REPLACE TEMP TABLE _asi_rows AS
WITH hours AS (
    SELECT pod_id, server_id, t, t AS t0, gpu_request, cpu_request_cores, priority_class,
           job_type_public, state_public IS NOT DISTINCT FROM 'Standby' AS standby,
           used_gpu_hours AS gpu_hours, state_public AS last_state, workload_id, cluster_id,
           model_type_public, is_genai_request, schedule_delay_sec, avg_gpu_sm_util,
           FALSE AS carried
    FROM _asi_day
    WHERE pod_id IS NOT NULL AND server_id IS NOT NULL
    UNION ALL
    SELECT pod_id, server_id, t_last, t_start, gpu_request, cpu_request_cores, priority_class,
           job_type_public, standby, gpu_hours, last_state, workload_id, cluster_id,
           model_type_public, is_genai_request, schedule_delay_sec, NULL, TRUE
    FROM _asi_open
),
marked AS (
    SELECT *,
        CASE WHEN lag(t) OVER w = t - 1
              AND lag(gpu_request) OVER w = gpu_request
              AND lag(cpu_request_cores) OVER w = cpu_request_cores
              AND lag(priority_class) OVER w IS NOT DISTINCT FROM priority_class
              AND lag(job_type_public) OVER w IS NOT DISTINCT FROM job_type_public
              AND lag(standby) OVER w = standby
        THEN 0 ELSE 1 END AS brk
    FROM hours
    WINDOW w AS (PARTITION BY pod_id, server_id ORDER BY t, t0)
),
numbered AS (
    SELECT *, sum(brk) OVER (PARTITION BY pod_id, server_id ORDER BY t, t0
                             ROWS UNBOUNDED PRECEDING) AS run
    FROM marked
)
SELECT *, min(t0) OVER (PARTITION BY pod_id, server_id, run) AS t_start
FROM numbered
