-- The oldest attempt that ran, or is running, this job's slot (the runner refuses a second).
SELECT id, job, slot, instance, host, pid, "trigger", outcome, started_at, finished_at,
       exit_code, message, fencing_token, session_id, strategy, lock_key
FROM lockconsole_runs
WHERE job = %(job)s
  AND slot = %(slot)s
  AND outcome IN ('acquired', 'succeeded')
ORDER BY started_at, id
LIMIT 1
