-- A job's attempts of other slots still "acquired" (its lock is held by the caller, so their
-- runners are gone), oldest slot first: rerun_abandoned closes them and reruns the slots (the
-- caller leaves manual runs alone).
-- The job's (job, slot) index finds them. The column list comes from RUN_COLUMNS.
SELECT {run_columns}
FROM lockconsole_runs
WHERE job = %(job)s
  AND outcome = 'acquired'
  AND slot <> %(slot)s
ORDER BY slot, id
LIMIT %(limit)s
