-- Forget scenario $name (before saving it again).
DELETE FROM scenario_allocations WHERE scenario = $name;
DELETE FROM scenarios WHERE name = $name;
