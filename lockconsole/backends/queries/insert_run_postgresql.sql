-- Record one attempt in the run ledger; return its id, and the ports that tell a direct connection.
-- A "skipped" or "paused" row (no job ran) turns synchronous_commit off for its own transaction:
-- it does not wait for the WAL flush. Every other row does.
-- The column lists come from RUN_COLUMNS (see sqlfiles.run_column_lists).
INSERT INTO lockconsole_runs ({run_insert_columns})
VALUES ({run_insert_values})
RETURNING id,
    inet_server_port(),
    inet_client_port(),
    CASE WHEN outcome IN ('skipped', 'paused') THEN set_config('synchronous_commit', 'off', true) END
