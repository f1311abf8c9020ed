-- Pod-hours the mapping cannot take: no pod or no server id.
SELECT _file AS file, _row AS "row",
       CASE WHEN pod_id IS NULL THEN 'pod_id' ELSE 'server_id' END AS "column",
       CAST(NULL AS VARCHAR) AS value,
       CASE WHEN pod_id IS NULL THEN 'missing required value (a pod-hour without pod_id)'
            ELSE 'missing required value (a pod-hour without server_id has no node)' END
           AS reason
FROM _asi_day
WHERE pod_id IS NULL OR server_id IS NULL
ORDER BY _file, _row
