-- The runs (_asi_keyed_runs, asi_runs) with their strings, fetched from the few rows of
-- _asi_rows they name by rid: the last state that is not null, and the first workload,
-- cluster and model type that are not null. Portable: both engines run this text.
WITH named AS (
    SELECT rid, last_state, workload_id, cluster_id, model_type_public
    FROM _asi_rows
    WHERE rid IN (
        SELECT r_state FROM _asi_keyed_runs
        UNION SELECT r_workload FROM _asi_keyed_runs
        UNION SELECT r_cluster FROM _asi_keyed_runs
        UNION SELECT r_model FROM _asi_keyed_runs
    )
)
SELECT r.pod_id, r.server_id, r.t_start, r.t_min, r.t_last, r.gpu_request,
       r.cpu_request_cores, r.priority_class, r.job_type_public, r.standby, r.gpu_hours,
       s.last_state, w.workload_id, c.cluster_id, m.model_type_public, r.is_genai_request,
       r.schedule_delay_sec, r.repeated
FROM _asi_keyed_runs AS r
LEFT JOIN named AS s ON s.rid = r.r_state
LEFT JOIN named AS w ON w.rid = r.r_workload
LEFT JOIN named AS c ON c.rid = r.r_cluster
LEFT JOIN named AS m ON m.rid = r.r_model
