SELECT pg_try_advisory_xact_lock(%(key1)s::integer, %(key2)s::integer), pg_backend_pid(), inet_server_port(), inet_client_port()
