-- The oldest attempt that ran, or is running, this job's slot (the runner refuses a second).
-- The column list comes from RUN_COLUMNS (see sqlfiles.run_column_lists).
SELECT {run_columns}
FROM lockconsole_runs
WHERE job = %(job)s
  AND slot = %(slot)s
  AND outcome IN ('acquired', 'succeeded')
ORDER BY started_at, id
LIMIT 1
