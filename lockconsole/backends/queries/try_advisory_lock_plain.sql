SELECT pg_try_advisory_lock(%(key)s::bigint), pg_backend_pid()
