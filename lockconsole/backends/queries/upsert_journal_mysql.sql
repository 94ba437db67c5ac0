-- The holder journal: a holding that appeared (executemany sends the rows as one multi-row
-- INSERT). One another sampler wrote first keeps the earliest sighting: seen_after is set
-- first, while first_seen still has its old value.
INSERT INTO lockconsole_holder_journal
    (holding, open_mark, database_name, kind, source, lock_key, job, pid, application, client,
     username, mode, locked_by, session_start, seen_after, first_seen, from_epoch)
VALUES (%(holding)s, 1, %(database_name)s, %(kind)s, %(source)s, %(lock_key)s, %(job)s,
        %(pid)s, %(application)s, %(client)s, %(username)s, %(mode)s, %(locked_by)s,
        %(session_start)s, %(seen_after)s, %(first_seen)s, %(from_epoch)s)
ON DUPLICATE KEY UPDATE
    seen_after = IF(VALUES(first_seen) < first_seen, VALUES(seen_after), seen_after),
    from_epoch = LEAST(from_epoch, VALUES(from_epoch)),
    first_seen = LEAST(first_seen, VALUES(first_seen))
