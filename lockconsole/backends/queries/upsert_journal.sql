-- The holder journal (SQLite): a holding that appeared; one another sampler wrote first keeps
-- the earliest sighting.
INSERT INTO lockconsole_holder_journal
    (holding, open_mark, database_name, kind, source, lock_key, job, pid, application, client,
     username, mode, locked_by, session_start, seen_after, first_seen, from_epoch)
VALUES (%(holding)s, 1, %(database_name)s, %(kind)s, %(source)s, %(lock_key)s, %(job)s,
        %(pid)s, %(application)s, %(client)s, %(username)s, %(mode)s, %(locked_by)s,
        %(session_start)s, %(seen_after)s, %(first_seen)s, %(from_epoch)s)
ON CONFLICT (holding, open_mark) DO UPDATE SET
    seen_after = CASE WHEN excluded.first_seen < first_seen
                      THEN excluded.seen_after ELSE seen_after END,
    first_seen = min(first_seen, excluded.first_seen),
    from_epoch = min(from_epoch, excluded.from_epoch)
