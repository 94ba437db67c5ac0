-- A fragment, not a statement: "the advisory lock of this key is held, granted, in this database,
-- by the backend {pid}". check_advisory_lock, check_advisory_lock_of and
-- finish_release_run_postgresql place it with {held_advisory_lock:<pid expression>}; sqlfiles.load
-- indents its lines under the placeholder's, so each statement's text stays as it was.
SELECT EXISTS (
    SELECT 1
    FROM pg_locks
    WHERE locktype = 'advisory'
      AND granted
      AND mode = 'ExclusiveLock'
      AND pid = {pid}
      AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
      AND classid::bigint = %(classid)s::bigint
      AND objid::bigint = %(objid)s::bigint
      AND objsubid = %(objsubid)s::smallint
)
