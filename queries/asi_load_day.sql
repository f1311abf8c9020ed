-- One block of hours of the ASI release's pod table (asi_pod_rows: pruned to the adapter's
-- columns, with the trace hour t), without the rows the mapping cannot take (asi_pod_rejects
-- names them). $files: the block's pod partition files. No file name or row number per row
-- (the name is the longest value of a row): the rejects queries read them from the files.
CREATE OR REPLACE TEMP TABLE _asi_day AS
SELECT * EXCLUDE (filename, file_row_number, schedule_delay, fault),
       CAST(schedule_delay AS BIGINT) AS schedule_delay_sec
FROM asi_pod_rows($files)
WHERE fault IS NULL
