-- Every recorded report of the same allocation state ($scenario; NULL: recorded),
-- window length ($span_s) and step ($step_s), oldest first: the report's trend chart,
-- and its last row the trend's baseline (the newest such report).
-- Output: report_id, created_at, at, start, end, figures (JSON text).
SELECT report_id, created_at, "at", "start", "end", figures
FROM reports
WHERE scenario IS NOT DISTINCT FROM $scenario
  AND abs(epoch("end") - epoch("start") - $span_s) < 0.001
  AND abs(step_s - $step_s) < 0.001
ORDER BY report_id
