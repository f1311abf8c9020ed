-- Each server-hour's GPU count in one day of server_hourly (the colouring's capacities).
SELECT CAST(day AS INTEGER) * 24 + CAST(hour AS INTEGER) AS t, server_id,
       CAST(gpu_count AS DOUBLE) AS gpu_count
FROM read_parquet($files, hive_partitioning = true, hive_types_autocast = false,
                  union_by_name = true)
WHERE server_id IS NOT NULL
