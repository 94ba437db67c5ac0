-- Every attempt of one job at the listed slots (a JSON array), to judge each slot whole.
SELECT {run_columns}
FROM lockconsole_runs
WHERE job = %(job)s
  AND slot IN (SELECT value FROM json_each(%(slots)s))
