-- The merged finish's savepoint: a failed finish_release_run rolls back to it and keeps the
-- lock's transaction (psycopg's transaction() would end it).
SAVEPOINT lockconsole_finish
