-- The recorded reports of the same trend as this one: the same allocation state
-- ($scenario, NULL: recorded), window length ($span_s), step ($step_s), demand ($demand:
-- the mode the report used) and shape budget ($shapes), whose windows end by $end, one
-- per window end (the newest, should a store hold two), in window-end order: the
-- report's trend chart, and the last of those ending before $end its baseline.
-- Output: report_id, created_at, at, start, end, figures (JSON text).
SELECT report_id, created_at, "at", "start", "end", figures
FROM reports
WHERE scenario IS NOT DISTINCT FROM $scenario
  AND abs(epoch("end") - epoch("start") - $span_s) < 0.001
  AND abs(step_s - $step_s) < 0.001
  AND demand = $demand
  AND shapes = $shapes
  AND "end" <= $end
QUALIFY row_number() OVER (PARTITION BY "end" ORDER BY report_id DESC) = 1
ORDER BY "end"
