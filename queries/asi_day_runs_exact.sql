-- When two run keys share the hash h that asi_day_runs groups by (its _asi_hash_clash has a
-- row): _asi_rows again, with h the seven run keys themselves (a struct, equal where the
-- keys are, nulls included), and the caller runs asi_day_runs once more over it.
ALTER VIEW _asi_rows RENAME TO _asi_rows_hashed;
CREATE TEMP VIEW _asi_rows AS
SELECT * REPLACE (
    struct_pack(pod_id, server_id, gpu_request, cpu_request_cores, priority_class,
                job_type_public, standby) AS h
)
FROM _asi_rows_hashed
