-- The newest instant an ingest call's exports said they were taken at (table exports),
-- with how it is known, the file and the call. Zero rows or one.
SELECT export_time AS "at", how, file, ingest_id
FROM exports
ORDER BY export_time DESC, ingest_id DESC, file
LIMIT 1
