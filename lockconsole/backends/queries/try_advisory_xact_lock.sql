SELECT pg_try_advisory_xact_lock(%(key)s::bigint), pg_backend_pid()
