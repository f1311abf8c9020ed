-- Saved scenarios, newest first.
SELECT name, created_at, command, "at", base, options
FROM scenarios
ORDER BY created_at DESC, name
