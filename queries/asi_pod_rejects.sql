-- Pod-hours the mapping cannot take: no pod or no server id. $files: the day's pod partition
-- files, read again only when the staged day holds such rows.
SELECT filename AS file, file_row_number + 1 AS "row",
       CASE WHEN pod_id IS NULL THEN 'pod_id' ELSE 'server_id' END AS "column",
       CAST(NULL AS VARCHAR) AS value,
       CASE WHEN pod_id IS NULL THEN 'missing required value (a pod-hour without pod_id)'
            ELSE 'missing required value (a pod-hour without server_id has no node)' END
           AS reason
FROM read_parquet(
    $files, hive_partitioning = true, hive_types_autocast = false, union_by_name = true,
    filename = true, file_row_number = true
)
WHERE pod_id IS NULL OR server_id IS NULL
ORDER BY file, "row"
