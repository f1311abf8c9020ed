-- Every node with the columns the time model reads, ordered by node_id.
SELECT node_id, gpu_model, gpus, cpus, memory_gib, switch_id, health
FROM nodes
ORDER BY node_id
