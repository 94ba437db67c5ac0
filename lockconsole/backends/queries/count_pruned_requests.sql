-- Prune --dry-run: how many finished run requests were last changed before the cutoff.
SELECT count(*) FROM lockconsole_requests
WHERE state IN ('succeeded', 'failed', 'lock_lost', 'skipped', 'paused', 'expired', 'error')
  AND updated_at < %(cutoff)s
