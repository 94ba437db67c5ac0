-- PgBouncer admin console (dbname=pgbouncer; simple query protocol only)
SHOW VERSION
