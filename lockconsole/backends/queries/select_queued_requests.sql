-- The queued, unexpired run requests (the server keeps those of its jobs and instance).
SELECT id, job, slot, instance, forced, state, served_by, run_id, requested_by, requested_at,
       updated_at, expires_at, reason
FROM lockconsole_requests
WHERE state = 'queued'
  AND expires_at > %(now)s
ORDER BY id
LIMIT 100
