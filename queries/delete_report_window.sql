-- The recorded reports of one trend (state, window length, step, demand, shape budget)
-- and window end ($end): the one a report of the same window replaces.
DELETE FROM reports
WHERE scenario IS NOT DISTINCT FROM $scenario
  AND abs(epoch("end") - epoch("start") - $span_s) < 0.001
  AND abs(step_s - $step_s) < 0.001
  AND demand = $demand
  AND shapes = $shapes
  AND "end" = $end
