-- Pod-hours the mapping cannot take (asi_pod_rows' fault: no pod or server id, a value that
-- is not a finite number), from the block's files (_asi_pod_rows), read again only when the
-- block loaded fewer rows than they hold. Portable: both engines run this text (a value's text
-- is each engine's spelling of the number, nan or NaN, 1e+20 or 1.0E20: asi2026 respells
-- Spark's as DuckDB's).
SELECT 'allocations' AS "table", file, "row", "column", value,
       CASE "column"
           WHEN 'pod_id' THEN 'missing required value (a pod-hour without pod_id)'
           WHEN 'server_id' THEN 'missing required value (a pod-hour without server_id has no node)'
           WHEN 'schedule_delay_sec' THEN value || ' is not a whole number of seconds'
           ELSE value || ' is not a finite number'
       END AS reason
FROM (
    SELECT filename AS file, file_row_number + 1 AS "row", fault AS "column",
           CASE fault
               WHEN 'gpu_request' THEN CAST(gpu_request AS VARCHAR)
               WHEN 'cpu_request_cores' THEN CAST(cpu_request_cores AS VARCHAR)
               WHEN 'used_gpu_hours' THEN CAST(used_gpu_hours AS VARCHAR)
               WHEN 'avg_gpu_sm_util' THEN CAST(avg_gpu_sm_util AS VARCHAR)
               WHEN 'schedule_delay_sec' THEN CAST(schedule_delay AS VARCHAR)
           END AS value
    FROM _asi_pod_rows
    WHERE fault IS NOT NULL
)
ORDER BY file, "row"
