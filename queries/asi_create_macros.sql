-- The ASI release's rows as the adapter reads them: table macros over a list of Parquet
-- files of one table (day=D/hour=HH partitions; t is the trace hour from the folder names).
-- Each row carries its file and row number (DuckDB reads them only for a query that selects
-- them) and `fault`: the first column whose value the mapping cannot take, or NULL. The
-- loading queries keep the rows without a fault; the rejects queries read the others.
-- A NaN or an infinity is a fault in every numeric column (isfinite: a bound alone would
-- not do, since DuckDB folds a bound that a file's statistics say always holds, and those
-- statistics leave NaN out).

-- asi_pod_rows(files): the pod table. Nulls become 0 where the paper's scripts coerce them.
CREATE OR REPLACE TEMP MACRO asi_pod_rows(files) AS TABLE
SELECT *,
       CASE WHEN pod_id IS NULL THEN 'pod_id'
            WHEN server_id IS NULL THEN 'server_id'
            WHEN NOT isfinite(gpu_request) THEN 'gpu_request'
            WHEN NOT isfinite(cpu_request_cores) THEN 'cpu_request_cores'
            WHEN NOT isfinite(used_gpu_hours) THEN 'used_gpu_hours'
            WHEN NOT isfinite(avg_gpu_sm_util) THEN 'avg_gpu_sm_util'
            WHEN NOT (isfinite(schedule_delay) AND schedule_delay = floor(schedule_delay)
                      AND abs(schedule_delay) < 9e15) THEN 'schedule_delay_sec'
       END AS fault
FROM (
    SELECT filename, file_row_number,
           CAST(day AS INTEGER) * 24 + CAST(hour AS INTEGER) AS t,
           pod_id, workload_id, server_id, cluster_id, state_public, priority_class,
           job_type_public, model_type_public,
           CAST(is_genai_request AS BOOLEAN) AS is_genai_request,
           COALESCE(CAST(gpu_request AS DOUBLE), 0) AS gpu_request,
           COALESCE(CAST(cpu_request_cores AS DOUBLE), 0) AS cpu_request_cores,
           COALESCE(CAST(used_gpu_hours AS DOUBLE), 0) AS used_gpu_hours,
           CAST(avg_gpu_sm_util AS DOUBLE) AS avg_gpu_sm_util,
           CAST(ready_status AS BOOLEAN) AS ready_status,
           CAST(schedule_delay_sec AS DOUBLE) AS schedule_delay
    FROM read_parquet(files, hive_partitioning = true, hive_types_autocast = false,
                      union_by_name = true, filename = true, file_row_number = true)
);

-- asi_server_rows(files, max_gpus, max_cpus): the server table. A server-hour given twice
-- (a copied part file) is a fault of all its rows but the first by value (then by file and
-- row): `fault` 'repeat'.
CREATE OR REPLACE TEMP MACRO asi_server_rows(files, max_gpus, max_cpus) AS TABLE
SELECT * EXCLUDE (copy, fault),
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
            FROM read_parquet(files, hive_partitioning = true, hive_types_autocast = false,
                              union_by_name = true, filename = true, file_row_number = true)
        )
    )
);
