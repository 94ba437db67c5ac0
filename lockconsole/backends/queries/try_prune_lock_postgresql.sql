-- One prune at a time per ledger database: a session lock, never waited for.
SELECT pg_try_advisory_lock(%(key)s::bigint)
