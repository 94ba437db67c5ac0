-- Force-release, guarded: terminate %(pid)s only if it still holds that advisory key, granted,
-- in this database, and (when given) still has the backend_start the operator saw (pid reuse).
-- 0 rows: nothing matched, nothing was done; 1 row: (pid, exited within the timeout).
SELECT a.pid, pg_terminate_backend(a.pid, %(timeout_ms)s::bigint) AS terminated
FROM pg_stat_activity a
WHERE a.pid = %(pid)s::int
  AND (%(backend_start)s::timestamptz IS NULL OR a.backend_start = %(backend_start)s::timestamptz)
  AND EXISTS (
    SELECT 1
    FROM pg_locks l
    WHERE l.locktype = 'advisory'
      AND l.granted
      AND l.pid = a.pid
      AND l.database = (SELECT oid FROM pg_database WHERE datname = current_database())
      AND l.classid::bigint = %(classid)s::bigint
      AND l.objid::bigint = %(objid)s::bigint
      AND l.objsubid = %(objsubid)s::smallint
  )
