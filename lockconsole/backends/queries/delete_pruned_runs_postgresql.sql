-- Prune: the listed attempts (by their key), in the batch's transaction.
DELETE FROM lockconsole_runs
WHERE id = ANY(%(ids)s::bigint[])
