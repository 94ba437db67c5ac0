-- One run's job, outcome and kept output (NULL when it had none); no row: no such run.
SELECT r.job, r.outcome, o.output
FROM lockconsole_runs r
LEFT JOIN lockconsole_run_output o ON o.run_id = r.id
WHERE r.id = %(run_id)s
