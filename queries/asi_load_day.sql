-- One block of hours of the ASI release's pod table (_asi_pod_rows, asi_pod_rows: pruned to
-- the adapter's columns, with the trace hour t), without the rows the mapping cannot take
-- (asi_pod_rejects names them): the rows each engine keeps as _asi_day. No file name or row
-- number per row (the name is the longest value of a row): the rejects queries read them
-- from the files. Portable: both engines run this text.
SELECT t, pod_id, workload_id, server_id, cluster_id, state_public, priority_class,
       job_type_public, model_type_public, is_genai_request, gpu_request, cpu_request_cores,
       used_gpu_hours, avg_gpu_sm_util, ready_status,
       CAST(schedule_delay AS BIGINT) AS schedule_delay_sec
FROM _asi_pod_rows
WHERE fault IS NULL
