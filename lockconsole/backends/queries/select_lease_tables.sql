-- Tables shaped like ShedLock's (name, lock_until, locked_at, locked_by) in this database.
SELECT table_schema::text AS table_schema, table_name::text AS table_name
FROM information_schema.columns
WHERE lower(column_name) IN ('name', 'lock_until', 'locked_at', 'locked_by')
  AND table_schema NOT IN ('pg_catalog', 'information_schema')
GROUP BY table_schema, table_name
HAVING count(DISTINCT lower(column_name)) = 4
ORDER BY 1, 2
