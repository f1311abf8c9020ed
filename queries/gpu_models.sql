-- The GPU models on the nodes, sorted.
SELECT DISTINCT gpu_model FROM nodes ORDER BY gpu_model
