-- Close one attempt of the run ledger: its outcome, when it ended, and how.
UPDATE lockconsole_runs
SET outcome = %(outcome)s,
    finished_at = %(finished_at)s,
    exit_code = %(exit_code)s,
    message = %(message)s
WHERE id = %(id)s
