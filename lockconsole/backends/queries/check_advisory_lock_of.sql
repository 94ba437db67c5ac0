SELECT EXISTS (
    SELECT 1
    FROM pg_locks
    WHERE locktype = 'advisory'
      AND granted
      AND mode = 'ExclusiveLock'
      AND pid = %(pid)s
      AND database = (SELECT oid FROM pg_database WHERE datname = current_database())
      AND classid::bigint = %(classid)s::bigint
      AND objid::bigint = %(objid)s::bigint
      AND objsubid = %(objsubid)s::smallint
)
