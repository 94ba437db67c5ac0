SELECT pg_try_advisory_xact_lock(%(key)s::bigint), pg_backend_pid(), inet_server_port(), inet_client_port()
