-- Record one attempt in the run ledger (SQLite, MySQL/MariaDB; the id comes from
-- cursor.lastrowid). The column lists come from RUN_COLUMNS (see sqlfiles.run_column_lists).
INSERT INTO lockconsole_runs ({run_insert_columns})
VALUES ({run_insert_values})
