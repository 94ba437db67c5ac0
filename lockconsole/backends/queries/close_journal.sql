-- The holder journal: close the open row of a holding no longer seen (last_seen NULL: a row
-- adopted from a sampler that stopped, whose last sure sighting is its first).
UPDATE lockconsole_holder_journal
SET open_mark = NULL,
    last_seen = COALESCE(%(last_seen)s, first_seen),
    gone_by = %(gone_by)s,
    held_seconds = %(gone_epoch)s - from_epoch
WHERE open_mark = 1 AND holding = %(holding)s
