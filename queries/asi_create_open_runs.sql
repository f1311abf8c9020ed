-- The (empty) carry-over of runs between days.
CREATE OR REPLACE TEMP TABLE _asi_open (
    pod_id VARCHAR, server_id VARCHAR, t_start INTEGER, t_last INTEGER, gpu_request DOUBLE,
    cpu_request_cores DOUBLE, priority_class VARCHAR, job_type_public VARCHAR, standby BOOLEAN,
    gpu_hours DOUBLE, last_state VARCHAR, workload_id VARCHAR, cluster_id VARCHAR,
    model_type_public VARCHAR, is_genai_request BOOLEAN, schedule_delay_sec BIGINT
)
