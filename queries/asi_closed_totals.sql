-- What asi_closed_allocations writes, in totals: runs, GPU-hours used (used_gpu_hours) and
-- GPU-hours requested over the runs' whole hours (a run open at the end is held to it).
SELECT count(*) AS runs, sum(gpu_hours) AS used,
       sum(gpu_request * (t_last + 1 - t_start)) AS requested
FROM _asi_runs
WHERE t_last < $day_end OR $last_day
