-- The runs touching the block (or day), from _asi_rows (asi_mark_runs), with the rid of
-- the rows that hold their strings (asi_run_strings fetches them). A run is the consecutive
-- hours of one pod on one server with the same GPU and CPU request, priority, job type and
-- Standby flag (README, "The alibaba-gpu-v2026 trace"): along a run, t - dense_rank() over
-- those seven keys in hour order is constant, and a missing hour changes it. This is the
-- one copy of that rule (asi_gpu_hours finds each GPU pod-hour's run in _asi_runs).
-- Portable: both engines run this text (DuckDB as written, Spark translated).
-- Most key groups are one whole run (as many rows as hours, the hours consecutive), read
-- off one aggregate without ranking; only the other groups are ranked and grouped again.
-- hours has one bit per hour a group's rows hold (bit 0 for a carried run; a block's hours
-- lie within 24 consecutive ones, so t % 62 tells them apart): fewer bits than rows means
-- an hour given twice, so such a group is ranked too, and its run that holds that hour
-- twice is `repeated` (the caller then removes the repeats, asi_mark_repeats, and runs
-- this again).
-- A run keeps its first hour (a carried run's own), its first and last hour in the block
-- (t_min, t_last), the sum of its GPU-hours, its first GenAI flag and scheduling delay that
-- are not null, and the rid of the rows holding its last state that is not null and its
-- first workload, cluster and model type that are not null (arg_min/arg_max skip nulls).
-- Strings are not aggregated here: over a block's ten million rows their aggregates spill
-- (2.3 GB at DuckDB's 2 GB limit, and three times the CPU of the integers').
WITH grouped AS (
    SELECT pod_id, server_id, gpu_request, cpu_request_cores, priority_class,
           job_type_public, standby, min(t0) AS t_start, min(t) AS t_min, max(t) AS t_last,
           sum(gpu_hours) AS gpu_hours,
           arg_min(is_genai_request, t) AS is_genai_request,
           arg_min(schedule_delay_sec, t) AS schedule_delay_sec,
           arg_max(CASE WHEN last_state IS NOT NULL THEN rid END, t) AS r_state,
           arg_min(CASE WHEN workload_id IS NOT NULL THEN rid END, t) AS r_workload,
           arg_min(CASE WHEN cluster_id IS NOT NULL THEN rid END, t) AS r_cluster,
           arg_min(CASE WHEN model_type_public IS NOT NULL THEN rid END, t) AS r_model,
           count(*) = max(t) - min(t) + 1
               AND count(*) = bit_count(bit_or(
                   CASE WHEN carried THEN CAST(1 AS BIGINT)
                        ELSE CAST(1 AS BIGINT) << CAST(1 + t % 62 AS INTEGER) END
               )) AS whole
    FROM _asi_rows
    GROUP BY pod_id, server_id, gpu_request, cpu_request_cores, priority_class,
             job_type_public, standby
),
ranked AS (
    SELECT r.*,
           r.t - dense_rank() OVER (
               PARTITION BY r.pod_id, r.server_id, r.gpu_request, r.cpu_request_cores,
                            r.priority_class, r.job_type_public, r.standby
               ORDER BY r.t
           ) AS run
    FROM _asi_rows AS r
    SEMI JOIN (SELECT * FROM grouped WHERE NOT whole) AS g
        ON r.pod_id = g.pod_id AND r.server_id = g.server_id
       AND r.gpu_request = g.gpu_request AND r.cpu_request_cores = g.cpu_request_cores
       AND r.priority_class IS NOT DISTINCT FROM g.priority_class
       AND r.job_type_public IS NOT DISTINCT FROM g.job_type_public
       AND r.standby = g.standby
)
SELECT pod_id, server_id, gpu_request, cpu_request_cores, priority_class, job_type_public,
       standby, t_start, t_min, t_last, gpu_hours, is_genai_request, schedule_delay_sec,
       r_state, r_workload, r_cluster, r_model, FALSE AS repeated
FROM grouped
WHERE whole
UNION ALL
SELECT pod_id, server_id, gpu_request, cpu_request_cores, priority_class, job_type_public,
       standby, min(t0), min(t), max(t), sum(gpu_hours), arg_min(is_genai_request, t),
       arg_min(schedule_delay_sec, t),
       arg_max(CASE WHEN last_state IS NOT NULL THEN rid END, t),
       arg_min(CASE WHEN workload_id IS NOT NULL THEN rid END, t),
       arg_min(CASE WHEN cluster_id IS NOT NULL THEN rid END, t),
       arg_min(CASE WHEN model_type_public IS NOT NULL THEN rid END, t),
       count(*) > max(t) - min(t) + 1
FROM ranked
GROUP BY pod_id, server_id, gpu_request, cpu_request_cores, priority_class, job_type_public,
         standby, run
