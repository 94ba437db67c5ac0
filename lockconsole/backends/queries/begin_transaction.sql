-- pg-xact: sent in one pipeline with the try-lock (psycopg has no begin() for an autocommit
-- connection's open-ended transaction), and by the prune on SQLite (sqlite3 has no begin()).
BEGIN
