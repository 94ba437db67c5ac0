-- `lockconsole init`: the server, the account, and what it may see and end.
-- pg_has_role is true for a superuser whatever the role.
SELECT current_setting('server_version') AS version,
       current_user::text AS usename,
       (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) AS superuser,
       pg_has_role(current_user, 'pg_read_all_stats', 'USAGE') AS read_all_stats,
       pg_has_role(current_user, 'pg_signal_backend', 'USAGE') AS signal_backend,
       has_database_privilege(current_database(), 'CREATE') AS can_create,
       current_database()::text AS datname
