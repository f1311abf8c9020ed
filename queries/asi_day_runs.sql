-- The runs touching the day, from _asi_rows, grouped by h, the one 64-bit hash of the seven
-- run keys (see asi_mark_runs): hours with equal (pod, server, request, priority, job type,
-- Standby) that are consecutive form one run. Most such groups are one unbroken run
-- (count = span), found by a hash aggregate of integers; only the groups with a gap are
-- ranked (t - rank is constant along a run) and grouped again.
-- Strings are not aggregated (string keys and aggregates cost most of the CPU on 29 M rows
-- a day): each run keeps the packed k (t << 40 | rid) of the rows holding its keys (its
-- first row), last state and first workload, cluster and model type that are not null,
-- and they are fetched by rid from the few rows named.
-- h2_min <> h2_max in a group means two keys share an h: _asi_hash_clash then holds a row
-- and the caller runs this again with h the keys themselves (asi_day_runs_exact).
-- hours has one bit per hour a group's rows hold (bit 0 for a carried run; a block's hours
-- lie within 24 consecutive ones, so t % 63 tells them apart): fewer bits than rows means
-- one hour given twice, and _asi_repeats then holds the group (asi_mark_repeats).
CREATE OR REPLACE TEMP TABLE _asi_groups AS
SELECT h, min(h2) AS h2_min, max(h2) AS h2_max,
       bit_or(CASE WHEN carried THEN CAST(1 AS UBIGINT)
                   ELSE CAST(1 AS UBIGINT) << (1 + t % 63) END) AS hours,
       min(t) AS t_min, max(t) AS t_last, count(*) AS n, min(t0) AS t_start,
       sum(gpu_hours) AS gpu_hours, min(k) AS k_key,
       max(CASE WHEN last_state IS NOT NULL THEN k END) AS k_state,
       min(CASE WHEN workload_id IS NOT NULL THEN k END) AS k_workload,
       min(CASE WHEN cluster_id IS NOT NULL THEN k END) AS k_cluster,
       min(CASE WHEN model_type_public IS NOT NULL THEN k END) AS k_model,
       arg_min(is_genai_request, t) AS is_genai_request,
       arg_min(schedule_delay_sec, t) AS schedule_delay_sec
FROM _asi_rows
GROUP BY h;

CREATE OR REPLACE TEMP TABLE _asi_hash_clash AS
SELECT h FROM _asi_groups WHERE h2_min <> h2_max LIMIT 1;

CREATE OR REPLACE TEMP TABLE _asi_repeats AS
SELECT h FROM _asi_groups WHERE n > bit_count(hours);

CREATE OR REPLACE TEMP TABLE _asi_keyed_runs AS
WITH broken_keys AS (
    SELECT h FROM _asi_groups WHERE n <> t_last - t_min + 1
),
broken AS (
    SELECT r.*, r.t - row_number() OVER (PARTITION BY r.h ORDER BY r.t, r.t0) AS grp
    FROM _asi_rows AS r
    SEMI JOIN broken_keys AS b ON r.h = b.h
)
SELECT t_start, t_last, gpu_hours, k_key, k_state, k_workload, k_cluster, k_model,
       is_genai_request, schedule_delay_sec
FROM _asi_groups
WHERE n = t_last - t_min + 1
UNION ALL
SELECT min(t0), max(t), sum(gpu_hours), min(k),
       max(CASE WHEN last_state IS NOT NULL THEN k END),
       min(CASE WHEN workload_id IS NOT NULL THEN k END),
       min(CASE WHEN cluster_id IS NOT NULL THEN k END),
       min(CASE WHEN model_type_public IS NOT NULL THEN k END),
       arg_min(is_genai_request, t), arg_min(schedule_delay_sec, t)
FROM broken
GROUP BY h, grp;
DROP TABLE _asi_groups;

-- the rows named (rid: the low 40 bits of k), and their keys and strings
CREATE OR REPLACE TEMP TABLE _asi_named AS
SELECT DISTINCT k & 1099511627775 AS rid
FROM (
    SELECT unnest([k_key, k_state, k_workload, k_cluster, k_model]) AS k
    FROM _asi_keyed_runs
)
WHERE k IS NOT NULL;

CREATE OR REPLACE TEMP TABLE _asi_named_values AS
SELECT rowid AS rid, pod_id, server_id, gpu_request, cpu_request_cores, priority_class,
       job_type_public, state_public IS NOT DISTINCT FROM 'Standby' AS standby,
       state_public AS last_state, workload_id, cluster_id, model_type_public
FROM _asi_day
WHERE rowid IN (SELECT rid FROM _asi_named)
UNION ALL
SELECT 549755813888 + rowid, pod_id, server_id, gpu_request, cpu_request_cores,
       priority_class, job_type_public, standby, last_state, workload_id, cluster_id,
       model_type_public
FROM _asi_open
WHERE 549755813888 + rowid IN (SELECT rid FROM _asi_named);
DROP TABLE _asi_named;

CREATE OR REPLACE TEMP TABLE _asi_runs AS
SELECT key.pod_id, key.server_id, r.t_start, r.t_last, key.gpu_request,
       key.cpu_request_cores, key.priority_class, key.job_type_public, key.standby,
       r.gpu_hours, s.last_state, w.workload_id, c.cluster_id, m.model_type_public,
       r.is_genai_request, r.schedule_delay_sec
FROM _asi_keyed_runs AS r
JOIN _asi_named_values AS key ON key.rid = r.k_key & 1099511627775
LEFT JOIN _asi_named_values AS s ON s.rid = r.k_state & 1099511627775
LEFT JOIN _asi_named_values AS w ON w.rid = r.k_workload & 1099511627775
LEFT JOIN _asi_named_values AS c ON c.rid = r.k_cluster & 1099511627775
LEFT JOIN _asi_named_values AS m ON m.rid = r.k_model & 1099511627775;
DROP TABLE _asi_keyed_runs;
DROP TABLE _asi_named_values;
