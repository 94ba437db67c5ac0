-- Record one attempt in the run ledger; return its id, and the ports that tell a direct connection.
-- The column lists come from RUN_COLUMNS (see sqlfiles.run_column_lists).
INSERT INTO lockconsole_runs ({run_insert_columns})
VALUES ({run_insert_values})
RETURNING id, inet_server_port(), inet_client_port()
