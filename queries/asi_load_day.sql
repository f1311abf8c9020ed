-- One day of the ASI release's GPU pod-hours (gpu_request > 0; about 7% of the rows),
-- pruned and typed (_asi_pods), with the trace hour t. $files: the day's pod partition files.
-- The CPU-only pod-hours are never materialised: they are aggregated straight from the files
-- (asi_cpu_groups, asi_cpu_hours).
CREATE OR REPLACE TEMP TABLE _asi_day AS
SELECT * FROM _asi_pods($files) WHERE gpu_request > 0
