-- The runs touching the day, grouped by the run keys themselves: asi_day_runs does it by
-- their hash, and this runs only when two keys share a hash. Hours with equal (pod, server, request,
-- priority, job type, Standby) that are consecutive form one run. Most such groups are
-- one unbroken run (count = span), found by a hash aggregate; only the pod-servers with a
-- broken group are ranked (t - rank is constant along a run) and grouped again.
-- A run's strings (last state; first workload, cluster and model type that are not null)
-- are not aggregated (string aggregates cost most of the CPU on 25 M rows a day): the
-- aggregate keeps the packed k (t << 40 | rid, see asi_mark_runs) of the rows holding them,
-- and they are fetched by rid from the few rows named.
CREATE OR REPLACE TEMP TABLE _asi_groups AS
SELECT pod_id, server_id, gpu_request, cpu_request_cores, priority_class, job_type_public,
       standby,
       min(t) AS t_min, max(t) AS t_last, count(*) AS n, min(t0) AS t_start,
       sum(gpu_hours) AS gpu_hours,
       max(CASE WHEN last_state IS NOT NULL THEN k END) AS k_state,
       min(CASE WHEN workload_id IS NOT NULL THEN k END) AS k_workload,
       min(CASE WHEN cluster_id IS NOT NULL THEN k END) AS k_cluster,
       min(CASE WHEN model_type_public IS NOT NULL THEN k END) AS k_model,
       arg_min(is_genai_request, t) AS is_genai_request,
       arg_min(schedule_delay_sec, t) AS schedule_delay_sec
FROM _asi_rows
GROUP BY pod_id, server_id, gpu_request, cpu_request_cores, priority_class, job_type_public,
         standby;

CREATE OR REPLACE TEMP TABLE _asi_keyed_runs AS
WITH broken_pairs AS (
    SELECT DISTINCT pod_id, server_id FROM _asi_groups WHERE n <> t_last - t_min + 1
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
       g.priority_class, g.job_type_public, g.standby, g.gpu_hours, g.k_state, g.k_workload,
       g.k_cluster, g.k_model, g.is_genai_request, g.schedule_delay_sec
FROM _asi_groups AS g
ANTI JOIN broken_pairs AS b ON g.pod_id = b.pod_id AND g.server_id = b.server_id
UNION ALL
SELECT pod_id, server_id, min(t0), max(t), gpu_request, cpu_request_cores, priority_class,
       job_type_public, standby, sum(gpu_hours),
       max(CASE WHEN last_state IS NOT NULL THEN k END),
       min(CASE WHEN workload_id IS NOT NULL THEN k END),
       min(CASE WHEN cluster_id IS NOT NULL THEN k END),
       min(CASE WHEN model_type_public IS NOT NULL THEN k END),
       arg_min(is_genai_request, t), arg_min(schedule_delay_sec, t)
FROM broken
GROUP BY pod_id, server_id, gpu_request, cpu_request_cores, priority_class, job_type_public,
         standby, grp;
DROP TABLE _asi_groups;

-- the rows named (rid: the low 40 bits of k), and their strings
CREATE OR REPLACE TEMP TABLE _asi_named AS
SELECT DISTINCT k & 1099511627775 AS rid
FROM (
    SELECT unnest([k_state, k_workload, k_cluster, k_model]) AS k FROM _asi_keyed_runs
)
WHERE k IS NOT NULL;

CREATE OR REPLACE TEMP TABLE _asi_named_values AS
SELECT rowid AS rid, state_public AS last_state, workload_id, cluster_id, model_type_public
FROM _asi_day
WHERE rowid IN (SELECT rid FROM _asi_named)
UNION ALL
SELECT 549755813888 + rowid, last_state, workload_id, cluster_id, model_type_public
FROM _asi_open
WHERE 549755813888 + rowid IN (SELECT rid FROM _asi_named);
DROP TABLE _asi_named;

CREATE OR REPLACE TEMP TABLE _asi_runs AS
SELECT r.pod_id, r.server_id, r.t_start, r.t_last, r.gpu_request, r.cpu_request_cores,
       r.priority_class, r.job_type_public, r.standby, r.gpu_hours, s.last_state,
       w.workload_id, c.cluster_id, m.model_type_public, r.is_genai_request,
       r.schedule_delay_sec
FROM _asi_keyed_runs AS r
LEFT JOIN _asi_named_values AS s ON s.rid = r.k_state & 1099511627775
LEFT JOIN _asi_named_values AS w ON w.rid = r.k_workload & 1099511627775
LEFT JOIN _asi_named_values AS c ON c.rid = r.k_cluster & 1099511627775
LEFT JOIN _asi_named_values AS m ON m.rid = r.k_model & 1099511627775;
DROP TABLE _asi_keyed_runs;
DROP TABLE _asi_named_values;
