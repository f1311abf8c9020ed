-- Forget the allocation rows of scenario $name.
DELETE FROM scenario_allocations WHERE scenario = $name
