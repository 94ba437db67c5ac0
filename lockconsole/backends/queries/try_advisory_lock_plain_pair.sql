SELECT pg_try_advisory_lock(%(key1)s::integer, %(key2)s::integer), pg_backend_pid()
