-- Requests no instance took in time: expired, with the reason.
UPDATE lockconsole_requests
SET state = 'expired', reason = %(reason)s, updated_at = %(now)s
WHERE state = 'queued'
  AND expires_at <= %(now)s
