-- From the footers of the day's pod partition files ($files), without reading their rows:
-- the pod-hours, and whether some may lack a pod or server id (a null count above 0, or
-- none recorded).
SELECT (SELECT COALESCE(sum(num_rows), 0) FROM parquet_file_metadata($files)) AS pod_rows,
       (SELECT COALESCE(bool_or(stats_null_count IS NULL OR stats_null_count > 0), FALSE)
        FROM parquet_metadata($files)
        WHERE path_in_schema IN ('pod_id', 'server_id')) AS may_lack_ids
