-- Each server-hour's GPU count in one day of server_hourly (the colouring's capacities),
-- of the rows the mapping takes (asi_server_rows: asi_server_rejects names the others).
SELECT t, server_id, gpu_count
FROM _asi_server_rows
WHERE fault IS NULL
