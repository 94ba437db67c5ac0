-- Prune --dry-run: how many holdings of the holder journal were gone before the cutoff.
SELECT count(*) FROM lockconsole_holder_journal
WHERE gone_by < %(cutoff)s
