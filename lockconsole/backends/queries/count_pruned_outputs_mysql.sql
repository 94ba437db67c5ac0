-- Prune --dry-run: how many of the listed runs have an output tail.
SELECT count(*) FROM lockconsole_run_output WHERE run_id IN %(ids)s
