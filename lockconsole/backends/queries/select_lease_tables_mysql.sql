-- Tables shaped like ShedLock's (name, lock_until, locked_at, locked_by) in this schema.
SELECT TABLE_SCHEMA AS table_schema, TABLE_NAME AS table_name
FROM information_schema.COLUMNS
WHERE LOWER(COLUMN_NAME) IN ('name', 'lock_until', 'locked_at', 'locked_by')
  AND TABLE_SCHEMA = DATABASE()
GROUP BY TABLE_SCHEMA, TABLE_NAME
HAVING COUNT(DISTINCT LOWER(COLUMN_NAME)) = 4
ORDER BY 1, 2
