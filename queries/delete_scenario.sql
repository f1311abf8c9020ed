-- Forget scenario $name's header (its rows: delete_scenario_rows).
DELETE FROM scenarios WHERE name = $name
