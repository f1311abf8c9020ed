-- The requested vCPU per GPU of GPU pod-hours, even hours of [$lo, $hi], as a histogram:
-- ceil(cpu / ceil(gpu)) per job type (a fractional pod counts as one GPU), all priorities.
SELECT job_type_public AS job_type,
       ceil(cpu_request_cores / ceil(gpu_request)) AS ratio,
       count(*) AS n
FROM asi_pod_hourly
WHERE t BETWEEN $lo AND $hi AND t % 24 % 2 = 0
  AND job_type_public IN ('training', 'online_inference', 'offline_inference', 'dev')
GROUP BY ALL
ORDER BY job_type, ratio
