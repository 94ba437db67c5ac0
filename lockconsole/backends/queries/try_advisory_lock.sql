SELECT CASE WHEN %(any_port)s::boolean OR inet_server_port() IS NULL OR inet_server_port() = %(port)s::integer THEN pg_try_advisory_lock(%(key)s::bigint) END, pg_backend_pid(), inet_server_port()
