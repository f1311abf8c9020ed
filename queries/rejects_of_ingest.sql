-- The rejects of one ingest call: files in load order, rows in file order; at most
-- $limit ($limit NULL: all). The total comes from rejects_count.
SELECT ingest_id, file, "table", "row", "column", value, reason
FROM rejects
WHERE ingest_id = $ingest_id
ORDER BY min(rowid) OVER (PARTITION BY file), "row", rowid
LIMIT $limit
