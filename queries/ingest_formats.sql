-- The input formats the store's ingests read (a replay's queue discipline is suggested by them).
-- Output: format (one row per distinct format, in name order).
SELECT DISTINCT format FROM ingests WHERE format IS NOT NULL ORDER BY format
