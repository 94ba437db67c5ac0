-- The lock connection's own session id, as pg_locks and pg_stat_activity name it.
SELECT pg_backend_pid()
