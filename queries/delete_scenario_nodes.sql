-- Forget the nodes of scenario $name.
DELETE FROM scenario_nodes WHERE scenario = $name
