SELECT pg_advisory_unlock(%(key1)s::integer, %(key2)s::integer)
