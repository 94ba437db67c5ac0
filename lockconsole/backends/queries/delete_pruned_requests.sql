-- Prune: a batch of finished run requests (answered, expired, in error) last changed before
-- the cutoff.
DELETE FROM lockconsole_requests
WHERE id IN (
    SELECT id FROM lockconsole_requests
    WHERE state IN ('succeeded', 'failed', 'lock_lost', 'skipped', 'paused', 'expired', 'error')
      AND updated_at < %(cutoff)s
    ORDER BY id
    LIMIT %(limit)s
)
