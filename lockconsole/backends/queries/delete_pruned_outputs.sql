-- Prune: the listed output tails (a JSON array of keys), in the batch's transaction.
DELETE FROM lockconsole_run_output
WHERE run_id IN (SELECT value FROM json_each(%(ids)s))
