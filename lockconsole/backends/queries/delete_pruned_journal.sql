-- Prune: a batch of the holder journal's holdings gone before the cutoff (an open one stays).
DELETE FROM lockconsole_holder_journal
WHERE id IN (
    SELECT id FROM lockconsole_holder_journal
    WHERE gone_by < %(cutoff)s
    ORDER BY gone_by
    LIMIT %(limit)s
)
