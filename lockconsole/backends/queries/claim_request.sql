-- Take a queued request: only one instance's UPDATE finds it still queued.
UPDATE lockconsole_requests
SET state = 'running', served_by = %(instance)s, updated_at = %(now)s
WHERE id = %(id)s
  AND state = 'queued'
  AND expires_at > %(now)s
