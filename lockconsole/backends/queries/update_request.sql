-- Record what became of a request this instance serves: its run, then its outcome.
UPDATE lockconsole_requests
SET state = %(state)s, run_id = %(run_id)s, reason = %(reason)s, updated_at = %(now)s
WHERE id = %(id)s
  AND served_by = %(instance)s
