-- The newest snapshot time of a store loaded from snapshots (kubectl: the nodes'
-- snapshot_time column), or NULL. Only run when nodes has that column.
-- Output: one row, one column "at" (TIMESTAMP).
SELECT max(snapshot_time) AS "at" FROM nodes
