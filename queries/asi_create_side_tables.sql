-- The ASI release's pruned side tables, which `fleetaudit paper` reads.
CREATE TABLE IF NOT EXISTS asi_pod_hourly (
    t INTEGER, pod_id VARCHAR, server_id VARCHAR, state_public VARCHAR, priority_class VARCHAR,
    job_type_public VARCHAR, gpu_request DOUBLE, cpu_request_cores DOUBLE,
    used_gpu_hours DOUBLE, avg_gpu_sm_util DOUBLE, ready_status BOOLEAN, _ingest_id BIGINT
);
CREATE TABLE IF NOT EXISTS asi_server_hourly (
    t INTEGER, server_id VARCHAR, cluster_id VARCHAR, asw_id VARCHAR, gpu_spec_public VARCHAR,
    gpu_model VARCHAR, gpu_count DOUBLE, cpu_capacity_cores DOUBLE, cpu_only_hp_cpu DOUBLE,
    cpu_only_hp_rows BIGINT, _ingest_id BIGINT
);
CREATE TABLE IF NOT EXISTS asi_trace (
    trace_start TIMESTAMP, t_first INTEGER, t_last INTEGER, _ingest_id BIGINT
);
