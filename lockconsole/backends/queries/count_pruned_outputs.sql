-- Prune --dry-run: how many of the listed runs (a JSON array) have an output tail.
SELECT count(*) FROM lockconsole_run_output WHERE run_id IN (SELECT value FROM json_each(%(ids)s))
