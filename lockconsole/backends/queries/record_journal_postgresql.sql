-- The holder journal: one sample's transitions in one statement. The CTE closes the open rows
-- of the holdings gone (last_seen NULL: a row adopted from a sampler that stopped, whose last
-- sure sighting is its first); the INSERT writes the holdings that appeared, and one another
-- sampler wrote first keeps the earliest sighting. Arrays carry the rows: one statement text
-- whatever their number.
WITH closed AS (
    UPDATE lockconsole_holder_journal AS j
    SET open_mark = NULL,
        last_seen = COALESCE(g.last_seen, j.first_seen),
        gone_by = g.gone_by,
        held_seconds = g.gone_epoch - j.from_epoch
    FROM unnest(%(gone_holding)s::text[], %(gone_last)s::timestamptz[],
                %(gone_by)s::timestamptz[], %(gone_epoch)s::float8[])
         AS g(holding, last_seen, gone_by, gone_epoch)
    WHERE j.holding = g.holding AND j.open_mark = 1
)
INSERT INTO lockconsole_holder_journal AS j
    (holding, open_mark, database_name, kind, source, lock_key, job, pid, application, client,
     username, mode, locked_by, session_start, seen_after, first_seen, from_epoch)
SELECT n.holding, 1, n.database_name, n.kind, n.source, n.lock_key, n.job, n.pid,
       n.application, n.client, n.username, n.mode, n.locked_by, n.session_start,
       n.seen_after, n.first_seen, n.from_epoch
FROM unnest(%(holding)s::text[], %(database_name)s::text[], %(kind)s::text[],
            %(source)s::text[], %(lock_key)s::text[], %(job)s::text[], %(pid)s::bigint[],
            %(application)s::text[], %(client)s::text[], %(username)s::text[],
            %(mode)s::text[], %(locked_by)s::text[], %(session_start)s::timestamptz[],
            %(seen_after)s::timestamptz[], %(first_seen)s::timestamptz[],
            %(from_epoch)s::float8[])
     AS n(holding, database_name, kind, source, lock_key, job, pid, application, client,
          username, mode, locked_by, session_start, seen_after, first_seen, from_epoch)
ORDER BY n.holding
ON CONFLICT ON CONSTRAINT uq_lockconsole_journal_open DO UPDATE SET
    seen_after = CASE WHEN EXCLUDED.first_seen < j.first_seen
                      THEN EXCLUDED.seen_after ELSE j.seen_after END,
    first_seen = LEAST(j.first_seen, EXCLUDED.first_seen),
    from_epoch = LEAST(j.from_epoch, EXCLUDED.from_epoch)
RETURNING holding, first_seen
