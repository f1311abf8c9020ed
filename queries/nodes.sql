-- Every node with the columns the time model reads, ordered by node_id. block_id is
-- matched by pattern: a store written before it existed, opened read-only, lacks it.
SELECT node_id, gpu_model, gpus, cpus, memory_gib, switch_id, COLUMNS('^(health|block_id)$')
FROM nodes
ORDER BY node_id
