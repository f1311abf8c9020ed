-- Server-hours the mapping cannot take (asi_server_rows' fault: no server id, a GPU count
-- that is no whole number within 0..max_gpus, CPU cores not within 0..max_cpus, a second
-- row of one server-hour), from the block's files (_asi_server_rows), read again only when
-- the block kept fewer rows than they hold. Portable: both engines run this text (asi2026
-- respells the numbers Spark quotes, 1.0E20, as DuckDB does, 1e+20).
SELECT 'nodes' AS "table", filename AS file, file_row_number + 1 AS "row",
       CASE fault WHEN 'repeat' THEN 'server_id' ELSE fault END AS "column",
       CASE fault
           WHEN 'gpu_count' THEN CAST(gpu_count AS VARCHAR)
           WHEN 'cpu_capacity_cores' THEN CAST(cpu_capacity_cores AS VARCHAR)
           WHEN 'repeat' THEN server_id
       END AS value,
       CASE fault
           WHEN 'server_id' THEN 'missing required value (a server-hour without server_id)'
           WHEN 'gpu_count' THEN COALESCE(CAST(gpu_count AS VARCHAR), '')
               || ' is not a whole number of GPUs within 0..' || CAST(max_gpus AS VARCHAR)
           WHEN 'cpu_capacity_cores' THEN CAST(cpu_capacity_cores AS VARCHAR)
               || ' is not a number of cores within 0..' || CAST(max_cpus AS VARCHAR)
           ELSE 'a second row for server ' || server_id || ' at trace hour '
               || CAST(t AS VARCHAR) || '; counted once'
       END AS reason
FROM _asi_server_rows
WHERE fault IS NOT NULL
ORDER BY file, "row"
