-- The next batch of attempts older than the cutoff, after the last one seen (a keyset on the
-- started_at index, whose entries carry the id, so dead entries are never walked again), with
-- every other attempt of the batch's slots (the job, slot index): each slot is judged whole.
SELECT r.id, r.job, r.slot, r.instance, r.outcome, r.started_at, r.finished_at
FROM lockconsole_runs r
JOIN (
    SELECT DISTINCT b.job, b.slot
    FROM (
        SELECT job, slot
        FROM lockconsole_runs
        WHERE started_at < %(cutoff)s
          AND started_at >= %(after)s
          AND (started_at > %(after)s OR id > %(after_id)s)
        ORDER BY started_at, id
        LIMIT %(limit)s
    ) b
) s ON r.job = s.job AND r.slot = s.slot
