-- A day without pod partitions: an empty _asi_day of the columns asi_load_day writes.
CREATE OR REPLACE TEMP TABLE _asi_day (
    t INTEGER, pod_id VARCHAR, workload_id VARCHAR, server_id VARCHAR, cluster_id VARCHAR,
    state_public VARCHAR, priority_class VARCHAR, job_type_public VARCHAR,
    model_type_public VARCHAR, is_genai_request BOOLEAN, gpu_request DOUBLE,
    cpu_request_cores DOUBLE, used_gpu_hours DOUBLE, avg_gpu_sm_util DOUBLE,
    ready_status BOOLEAN, schedule_delay_sec BIGINT
)
