-- Close one attempt of the run ledger, only while it is still "acquired" by the same instance
-- and process: an attempt that another instance closed (as abandoned) keeps that close.
UPDATE lockconsole_runs
SET outcome = %(outcome)s,
    finished_at = %(finished_at)s,
    exit_code = %(exit_code)s,
    message = %(message)s
WHERE id = %(id)s
  AND outcome = 'acquired'
  AND instance = %(instance)s
  AND pid = %(pid)s
