-- The holder journal: close the open rows of the holdings one sample no longer saw, in one
-- statement (PyMySQL sends a tuple as a parenthesised list).
UPDATE lockconsole_holder_journal
SET open_mark = NULL,
    last_seen = COALESCE(%(last_seen)s, first_seen),
    gone_by = %(gone_by)s,
    held_seconds = %(gone_epoch)s - from_epoch
WHERE open_mark = 1 AND holding IN %(holdings)s
