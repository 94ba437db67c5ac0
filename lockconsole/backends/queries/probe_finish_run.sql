-- Touches no row: fails at once when this role may insert attempts but not close them.
UPDATE lockconsole_runs
SET outcome = outcome,
    finished_at = finished_at,
    exit_code = exit_code,
    message = message
WHERE 1 = 0
