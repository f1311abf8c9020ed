-- Rows the store's ingests rejected, per table (rejects carry no time of their own).
SELECT "table", count(*) AS rejected
FROM rejects
GROUP BY "table"
ORDER BY "table"
