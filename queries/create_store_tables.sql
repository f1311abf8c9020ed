-- The store's own tables (the four input tables are created from fleetaudit/model/schema.py).
CREATE TABLE IF NOT EXISTS meta (key VARCHAR, value VARCHAR);
CREATE TABLE IF NOT EXISTS rejects (
    ingest_id BIGINT, file VARCHAR, "table" VARCHAR, "row" BIGINT,
    "column" VARCHAR, value VARCHAR, reason VARCHAR
);
CREATE TABLE IF NOT EXISTS ingests (
    ingest_id BIGINT, started_at TIMESTAMP, finished_at TIMESTAMP,
    format VARCHAR, files VARCHAR, summary VARCHAR
);
-- the instant an ingest call's exports were taken, where they say it themselves (or
-- --export-time says it): one row per file that carries its own time
CREATE TABLE IF NOT EXISTS exports (
    ingest_id BIGINT, file VARCHAR, export_time TIMESTAMP, how VARCHAR
);
CREATE TABLE IF NOT EXISTS scenarios (
    name VARCHAR, created_at TIMESTAMP, command VARCHAR, options VARCHAR,
    "at" TIMESTAMP, base VARCHAR
);
CREATE TABLE IF NOT EXISTS scenario_allocations (
    scenario VARCHAR, removed BOOLEAN,
    alloc_id VARCHAR, job_id VARCHAR, node_id VARCHAR, gpus DOUBLE, cpus DOUBLE,
    memory_gib DOUBLE, priority VARCHAR, workload VARCHAR, tenant VARCHAR,
    start_time TIMESTAMP, end_time TIMESTAMP, checkpoint_interval_s DOUBLE, sleepable BOOLEAN
);
CREATE TABLE IF NOT EXISTS whatif_runs (
    run_id BIGINT, created_at TIMESTAMP, kind VARCHAR, "at" TIMESTAMP, scenario VARCHAR,
    ingest_id BIGINT, options VARCHAR, document VARCHAR
);
CREATE TABLE IF NOT EXISTS reports (
    report_id BIGINT, created_at TIMESTAMP, "at" TIMESTAMP, "start" TIMESTAMP, "end" TIMESTAMP,
    step_s DOUBLE, scenario VARCHAR, ingest_id BIGINT, figures VARCHAR
);
