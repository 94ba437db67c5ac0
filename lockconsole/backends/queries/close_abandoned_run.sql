-- Close an attempt left "acquired" whose lock was found free: only if it is still "acquired"
-- with the session (or lease token) that was checked. finished_at is left empty: the end is unknown.
UPDATE lockconsole_runs
SET outcome = 'lock_lost',
    finished_at = %(finished_at)s,
    message = %(message)s
WHERE id = %(id)s
  AND outcome = 'acquired'
  AND COALESCE(session_id, -1) = %(session_id)s
  AND COALESCE(fencing_token, -1) = %(fencing_token)s
