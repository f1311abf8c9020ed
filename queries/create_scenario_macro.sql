-- allocations_in(scn): the allocation state every command reads.
-- scn NULL: the recorded allocations. Otherwise the scenario's rows: on base
-- 'recorded' they override recorded rows by alloc_id (removed = true deletes
-- one); on base 'empty' they are the whole state.
CREATE OR REPLACE TEMP MACRO allocations_in(scn) AS TABLE
SELECT alloc_id, job_id, node_id, gpus, cpus, memory_gib, priority, workload, tenant,
       start_time, end_time, checkpoint_interval_s, sleepable
FROM allocations AS a
WHERE scn IS NULL
   OR (NOT EXISTS (SELECT 1 FROM scenarios AS s WHERE s.name = scn AND s.base = 'empty')
       AND NOT EXISTS (SELECT 1 FROM scenario_allocations AS o
                       WHERE o.scenario = scn AND o.alloc_id = a.alloc_id))
UNION ALL
SELECT alloc_id, job_id, node_id, gpus, cpus, memory_gib, priority, workload, tenant,
       start_time, end_time, checkpoint_interval_s, sleepable
FROM scenario_allocations
WHERE scenario = scn AND NOT removed
