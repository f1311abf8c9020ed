-- The nodes of scenario $scenario (saved by an edit of the fleet), ordered by node_id;
-- none: the scenario reads the recorded nodes. The columns of queries/nodes.sql.
SELECT node_id, gpu_model, gpus, cpus, memory_gib, switch_id, health, block_id
FROM scenario_nodes
WHERE scenario = $scenario
ORDER BY node_id
