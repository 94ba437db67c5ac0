-- The next batch of attempts older than the cutoff, after the last one seen (keyset on the
-- started_at index, whose entries carry the id): old rows first, dead index entries skipped.
SELECT id, job, slot, started_at
FROM lockconsole_runs
WHERE started_at < %(cutoff)s
  AND started_at >= %(after)s
  AND (started_at > %(after)s OR id > %(after_id)s)
ORDER BY started_at, id
LIMIT %(limit)s
