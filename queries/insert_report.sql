-- Record one report's headline figures ($figures: JSON text) for the next
-- report's trend, stamped with the latest ingest it saw and the store's export time
-- ($exported). A report of the same trend and window end replaces the one recorded
-- before it (a re-run keeps one point per window): delete_report_window runs first.
INSERT INTO reports (report_id, created_at, "at", "start", "end", step_s, scenario,
                     ingest_id, figures, demand, shapes, exported)
VALUES (
    (SELECT coalesce(max(report_id), 0) + 1 FROM reports),
    $generated_at, $at, $start, $end, $step_s, $scenario,
    (SELECT max(ingest_id) FROM ingests), $figures, $demand, $shapes, $exported
)
