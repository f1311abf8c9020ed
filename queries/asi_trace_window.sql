-- The trace hours the store holds from an alibaba-gpu-v2026 ingest, and its trace start.
SELECT trace_start, t_first, t_last,
       (SELECT min(t) FROM asi_server_hourly) AS t_min,
       (SELECT max(t) FROM asi_server_hourly) AS t_max
FROM asi_trace
