-- The newest recorded report of the store (by when it was recorded), whatever its
-- window: when it was recorded and the export time it saw (NULL before that was kept).
-- Output: at most one row: created_at, exported.
SELECT created_at, exported
FROM reports
ORDER BY report_id DESC
LIMIT 1
