-- An attempt that another instance closed as lock_lost ran on until now: record its real end
-- (and its job's exit code), so the ledger shows how long the two executions overlapped.
UPDATE lockconsole_runs
SET finished_at = %(finished_at)s,
    exit_code = COALESCE(exit_code, %(exit_code)s)
WHERE id = %(id)s
  AND outcome = 'lock_lost'
  AND instance = %(instance)s
  AND pid = %(pid)s
  AND (finished_at IS NULL OR finished_at < %(finished_at)s)
