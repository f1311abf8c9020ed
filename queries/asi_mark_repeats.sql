-- The rows of _asi_day that give a pod-hour again: the same run keys (asi_runs) at the
-- same hour as another row of the block, on a pod and server with a repeated run
-- (asi_runs). All but the first of each are repeats (rid: the row's rowid), the first
-- by value: the rows asi_pod_repeats names as rejects, whose values it orders the same way.
-- Each engine keeps them as _asi_repeated, and removes their rows (by rowid: asi_mark_runs)
-- from _asi_day. Portable: both engines run this text.
SELECT rid, pod_id, server_id, t
FROM (
    SELECT rowid AS rid, pod_id, server_id, t,
           row_number() OVER (
               PARTITION BY pod_id, server_id, gpu_request, cpu_request_cores, priority_class,
                            job_type_public, state_public IS NOT DISTINCT FROM 'Standby', t
               ORDER BY workload_id, cluster_id, state_public, model_type_public,
                        is_genai_request, used_gpu_hours, avg_gpu_sm_util, ready_status,
                        schedule_delay_sec
           ) AS copy
    FROM _asi_day
    SEMI JOIN (SELECT DISTINCT pod_id, server_id FROM _asi_runs WHERE repeated)
        USING (pod_id, server_id)
)
WHERE copy > 1
