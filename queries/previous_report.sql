-- The newest recorded report of the same allocation state ($scenario; NULL: recorded).
-- Output: at most one row: report_id, created_at, at, start, end, step_s, figures (JSON text).
SELECT report_id, created_at, "at", "start", "end", step_s, figures
FROM reports
WHERE scenario IS NOT DISTINCT FROM $scenario
ORDER BY report_id DESC
LIMIT 1
