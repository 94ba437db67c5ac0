-- Queue one run request for the fleet and return its id.
INSERT INTO lockconsole_requests
  (job, slot, instance, forced, state, requested_by, requested_at, updated_at, expires_at)
VALUES
  (%(job)s, %(slot)s, %(instance)s, %(forced)s, 'queued', %(requested_by)s, %(now)s, %(now)s,
   %(expires_at)s)
RETURNING id
