-- Every attempt of one job at the listed slots (the job, slot index), to judge each slot whole.
SELECT {run_columns}
FROM lockconsole_runs
WHERE job = %(job)s
  AND slot = ANY(%(slots)s)
