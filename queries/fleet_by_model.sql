-- Installed capacity per GPU model: nodes, GPUs, healthy GPUs, switch domains.
SELECT gpu_model,
       count(*) AS nodes,
       sum(gpus) AS gpus,
       sum(CASE WHEN health = 'healthy' THEN gpus ELSE 0 END) AS healthy_gpus,
       count(DISTINCT COALESCE(switch_id, node_id)) AS domains
FROM nodes
GROUP BY gpu_model
ORDER BY gpus DESC, gpu_model
