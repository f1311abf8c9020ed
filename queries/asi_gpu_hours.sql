-- The day's GPU pod-hours with an SM reading, for telemetry: the run (alloc_id, its first
-- hour) each belongs to, found in _asi_runs (asi_runs): the run of the same keys whose
-- hours in the block hold the pod-hour's.
SELECT h.server_id AS node_id, h.t,
       r.pod_id || '@' || CAST(r.t_start AS VARCHAR) AS alloc_id,
       least(1.0, h.avg_gpu_sm_util / (h.gpu_request * 100)) AS ratio
FROM _asi_rows AS h
JOIN _asi_runs AS r
    ON h.pod_id = r.pod_id AND h.server_id = r.server_id
   AND h.gpu_request = r.gpu_request AND h.cpu_request_cores = r.cpu_request_cores
   AND h.priority_class IS NOT DISTINCT FROM r.priority_class
   AND h.job_type_public IS NOT DISTINCT FROM r.job_type_public
   AND h.standby = r.standby
   AND h.t BETWEEN r.t_min AND r.t_last
WHERE h.gpu_request > 0 AND r.gpu_request > 0 AND NOT h.carried
  AND h.avg_gpu_sm_util IS NOT NULL
