-- One run request.
SELECT id, job, slot, instance, forced, state, served_by, run_id, requested_by, requested_at,
       updated_at, expires_at, reason
FROM lockconsole_requests
WHERE id = %(id)s
