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
-- the fleet of a scenario saved by an edit of the nodes (whatif remedies); a scenario
-- without rows here reads the recorded nodes
CREATE TABLE IF NOT EXISTS scenario_nodes (
    scenario VARCHAR, node_id VARCHAR, gpu_model VARCHAR, gpus BIGINT, cpus DOUBLE,
    memory_gib DOUBLE, switch_id VARCHAR, health VARCHAR, block_id VARCHAR
);
CREATE TABLE IF NOT EXISTS whatif_runs (
    run_id BIGINT, created_at TIMESTAMP, kind VARCHAR, "at" TIMESTAMP, scenario VARCHAR,
    ingest_id BIGINT, options VARCHAR, document VARCHAR
);
CREATE TABLE IF NOT EXISTS reports (
    report_id BIGINT, created_at TIMESTAMP, "at" TIMESTAMP, "start" TIMESTAMP, "end" TIMESTAMP,
    step_s DOUBLE, scenario VARCHAR, ingest_id BIGINT, figures VARCHAR
);
-- What else defines a report's figures (its trend compares like for like), and the
-- store's export time when it was recorded (a stale export): a store from before them
-- gains them, NULL in its earlier reports.
ALTER TABLE reports ADD COLUMN IF NOT EXISTS demand VARCHAR;
ALTER TABLE reports ADD COLUMN IF NOT EXISTS shapes VARCHAR;
ALTER TABLE reports ADD COLUMN IF NOT EXISTS exported TIMESTAMP;
