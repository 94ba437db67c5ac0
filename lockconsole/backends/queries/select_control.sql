-- The pause of one job in force at %(now)s, if any (read by every attempt before the lock).
SELECT note, paused_by, paused_at, paused_until
FROM lockconsole_controls
WHERE job = %(job)s
  AND (paused_until IS NULL OR paused_until > %(now)s)
