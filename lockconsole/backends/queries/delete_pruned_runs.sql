-- Prune: the listed attempts (a JSON array of keys), in the batch's transaction.
DELETE FROM lockconsole_runs
WHERE id IN (SELECT value FROM json_each(%(ids)s))
