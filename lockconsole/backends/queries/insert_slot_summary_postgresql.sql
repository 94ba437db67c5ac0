-- Prune: keep a slot's verdict before its attempts go; a slot summarized before keeps its row.
INSERT INTO lockconsole_slot_summaries
    (job, slot, status, attempts, instances, overlap_seconds, first_started_at,
     last_finished_at, pruned_at)
VALUES (%(job)s, %(slot)s, %(status)s, %(attempts)s, %(instances)s, %(overlap_seconds)s,
        %(first_started_at)s, %(last_finished_at)s, %(pruned_at)s)
ON CONFLICT (job, slot) DO NOTHING
