-- Prune: the listed output tails (by their key), in the batch's transaction.
DELETE FROM lockconsole_run_output
WHERE run_id IN %(ids)s
