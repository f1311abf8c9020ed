-- The ASI release's server table as the adapter reads it (view _asi_server_rows): from
-- _asi_server_files (as _asi_pod_files, asi_pod_rows) and the sanity bounds of a server's
-- capacity (_asi_limits: max_gpus, max_cpus, one row, asi_limits). `fault`: no server id, a
-- GPU count that is no whole number within 0..max_gpus, CPU cores not within 0..max_cpus,
-- or 'repeat': a server-hour given twice (a copied part file) is a fault of all its rows
-- but the first by value (then by file and row). Portable: both engines run this text.
SELECT t, server_id, cluster_id, asw_id, gpu_spec_public, gpu_count, cpu_capacity_cores,
       filename, file_row_number, max_gpus, max_cpus,
       CASE WHEN fault IS NULL AND copy > 1 THEN 'repeat' ELSE fault END AS fault
FROM (
    SELECT *,
           row_number() OVER (
               PARTITION BY t, server_id, fault IS NULL
               ORDER BY gpu_count, cpu_capacity_cores, gpu_spec_public, asw_id, cluster_id,
                        filename, file_row_number
           ) AS copy
    FROM (
        SELECT *,
               CASE WHEN server_id IS NULL THEN 'server_id'
                    WHEN NOT (isfinite(gpu_count) AND gpu_count = floor(gpu_count)
                              AND gpu_count >= 0 AND gpu_count <= max_gpus) THEN 'gpu_count'
                    WHEN NOT (isfinite(cpu_capacity_cores) AND cpu_capacity_cores >= 0
                              AND cpu_capacity_cores <= max_cpus) THEN 'cpu_capacity_cores'
               END AS fault
        FROM (
            SELECT filename, file_row_number,
                   CAST(day AS INTEGER) * 24 + CAST(hour AS INTEGER) AS t,
                   server_id, cluster_id, asw_id, gpu_spec_public,
                   CAST(gpu_count AS DOUBLE) AS gpu_count,
                   CAST(cpu_capacity_cores AS DOUBLE) AS cpu_capacity_cores
            FROM _asi_server_files
        ) AS f
        CROSS JOIN _asi_limits
    ) AS c
) AS r
