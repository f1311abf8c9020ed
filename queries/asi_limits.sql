-- The sanity bounds of a server-hour's capacity (_asi_limits, one row), as ingest checks a
-- node's: asi_server_rows reads them.
SELECT CAST($max_gpus AS BIGINT) AS max_gpus, CAST($max_cpus AS BIGINT) AS max_cpus
