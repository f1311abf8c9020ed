-- The newest snapshot time of a store loaded from snapshots (kubectl: the nodes'
-- snapshot_time column), or NULL. Only run when nodes has that column.
-- Output: one row, one column "at" (TIMESTAMP). A snapshot_time column of a native nodes
-- file is kept as it was given (text): cast, and a value that is no time left out.
SELECT max(TRY_CAST(snapshot_time AS TIMESTAMP)) AS "at" FROM nodes
