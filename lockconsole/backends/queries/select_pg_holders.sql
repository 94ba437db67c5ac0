-- Advisory-lock holders and waiters in the current database, one statement, one round trip.
-- Rows of kind 0 are locks (pid, classid, objid, objsubid, mode, granted, waitstart);
-- rows of kind 1 are the sessions behind them, each once (so a session's columns are not
-- repeated for each of its locks); the one row of kind 2 names current_user and the
-- database. classid/objid are sent as the raw oids: Python joins and signs them.
WITH db AS (
    SELECT oid FROM pg_database WHERE datname = current_database()
), l AS MATERIALIZED (
    SELECT pid, classid, objid, objsubid, mode, granted, waitstart
    FROM pg_locks
    WHERE locktype = 'advisory' AND database = (SELECT oid FROM db)
), p AS (
    SELECT pid, bool_or(NOT granted) AS waiting FROM l GROUP BY pid
)
SELECT 0 AS kind, l.pid, l.classid::bigint AS classid, l.objid::bigint AS objid,
       l.objsubid, l.mode, l.granted, l.waitstart,
       NULL::text AS usename, NULL::text AS application_name, NULL::text AS client_addr,
       NULL::timestamptz AS backend_start, NULL::timestamptz AS xact_start, NULL::text AS state,
       NULL::timestamptz AS state_change, NULL::text AS query, NULL::int[] AS blocked_by
FROM l
UNION ALL
SELECT 1, a.pid, NULL, NULL, NULL, NULL, NULL, NULL,
       a.usename::text, a.application_name, host(a.client_addr), a.backend_start, a.xact_start,
       a.state, a.state_change, left(a.query, 200),
       CASE WHEN p.waiting THEN pg_blocking_pids(a.pid) END
FROM p JOIN pg_stat_activity a ON a.pid = p.pid
UNION ALL
SELECT 2, NULL, NULL, NULL, NULL, NULL, NULL, NULL,
       current_user::text, current_database()::text, NULL, NULL, NULL, NULL, NULL, NULL, NULL
