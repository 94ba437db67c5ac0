-- Finish and release one attempt in one round trip on the lock's own connection: the lock's
-- last check, the outcome (only while the row is still "acquired" by this instance and process;
-- "lock_lost" if the check failed), committed by autocommit before RELEASE_LOCK lets the lock go.
SET @lc_held = COALESCE(IS_USED_LOCK(%(name)s) = CONNECTION_ID(), 0);
UPDATE lockconsole_runs
SET outcome = IF(@lc_held, %(outcome)s, 'lock_lost'),
    finished_at = %(finished_at)s,
    exit_code = %(exit_code)s,
    message = IF(@lc_held, %(message)s, %(lost_message)s)
WHERE id = %(id)s
  AND outcome = 'acquired'
  AND instance = %(instance)s
  AND pid = %(pid)s;
SELECT @lc_held, ROW_COUNT(), IF(@lc_held, RELEASE_LOCK(%(name)s), NULL)
