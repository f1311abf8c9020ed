-- How many rows one ingest call rejected, and the newest ingest call ($ingest_id NULL).
SELECT
    (SELECT max(ingest_id) FROM ingests) AS latest,
    (SELECT count(*) FROM rejects WHERE ingest_id = coalesce($ingest_id, (SELECT max(ingest_id) FROM ingests))) AS total,
    (SELECT count(*) FROM ingests WHERE ingest_id = $ingest_id) AS found
