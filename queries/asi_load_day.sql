-- One block of hours of the ASI release's pod table (asi_pod_rows: pruned to the adapter's
-- columns, with the trace hour t), without the rows the mapping cannot take (asi_pod_rejects
-- names them). $files: the block's pod partition files. No file name or row number per row
-- (the name is the longest value of a row): the rejects queries read them from the files.
-- h: the one 64-bit hash of the seven run keys that asi_day_runs groups by (see
-- asi_mark_runs), computed once here rather than in each pass over the block's rows.
CREATE OR REPLACE TEMP TABLE _asi_day AS
SELECT * EXCLUDE (filename, file_row_number, schedule_delay, fault),
       CAST(schedule_delay AS BIGINT) AS schedule_delay_sec,
       hash(pod_id, server_id, gpu_request, cpu_request_cores, priority_class,
            job_type_public, state_public IS NOT DISTINCT FROM 'Standby') AS h
FROM asi_pod_rows($files)
WHERE fault IS NULL
