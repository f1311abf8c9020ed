-- The rejects of the pod-hours given again (_asi_repeated, asi_mark_repeats): read again
-- from the block's files (_asi_pod_rows) for their file and row, ranked as asi_mark_repeats ranks
-- them (by value, then by file and row, so the first of identical rows is the one kept).
SELECT 'allocations' AS "table", filename AS file, file_row_number + 1 AS "row",
       'pod_id' AS "column", pod_id AS value,
       'a second row for pod ' || pod_id || ' on server ' || server_id || ' at trace hour '
           || CAST(t AS VARCHAR) || ' (the first: row ' || CAST(first_row + 1 AS VARCHAR)
           || ' of ' || first_file || '); counted once' AS reason
FROM (
    SELECT *, row_number() OVER w AS copy, first_value(filename) OVER w AS first_file,
           first_value(file_row_number) OVER w AS first_row
    FROM _asi_pod_rows
    SEMI JOIN (SELECT DISTINCT pod_id, server_id, t FROM _asi_repeated)
        USING (pod_id, server_id, t)
    WHERE fault IS NULL
    WINDOW w AS (
        PARTITION BY pod_id, server_id, gpu_request, cpu_request_cores, priority_class,
                     job_type_public, state_public IS NOT DISTINCT FROM 'Standby', t
        ORDER BY workload_id, cluster_id, state_public, model_type_public, is_genai_request,
                 used_gpu_hours, avg_gpu_sm_util, ready_status, schedule_delay, filename,
                 file_row_number
    )
)
WHERE copy > 1
ORDER BY file, "row"
