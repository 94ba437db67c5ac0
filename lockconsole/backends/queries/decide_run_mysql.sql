-- Decide and record one attempt in one round trip on the lock's own connection (statements sent
-- together; autocommit, so each statement reads what committed before it started): the try-lock,
-- the probe that fails at once when this role could record an attempt but never close it, the
-- slot's claim (read by a statement that starts after GET_LOCK took the lock), [controls] the
-- job's control row (a pause in force at the attempt's start), the verdict, the INSERT of
-- "acquired" or "skipped" (none when an earlier attempt of the slot is still "acquired": the
-- runner then goes on one statement at a time), and the answer, which lets the lock go when the
-- slot already succeeded. A pause: when GET_LOCK answered, the verdict is "paused", nothing is
-- inserted, the lock is let go, and the pause's fields are answered so the runner records the
-- paused attempt in its own words. No statement reads a derived table (a subquery in FROM):
-- MariaDB spends about 0.2 ms planning each one, more than a statement of its own costs.
-- The answer is one JSON array (one column to read): outcome, the new row's id, the claim's id,
-- the message, RELEASE_LOCK's result, GET_LOCK's, CONNECTION_ID(), then the pause's note,
-- paused_by, paused_at and paused_until (NULL unless paused; the times as text).
-- The variables start as typed NULLs: a bare NULL is a binary string to MariaDB, and one binary
-- value turns the whole JSON answer binary (its text no longer the connection's utf8mb4).
-- The column lists come from RUN_COLUMNS (see sqlfiles.run_column_lists).
SET @lc_got = GET_LOCK(%(name)s, 0), @lc_claim = CAST(NULL AS SIGNED),
    @lc_claimed = CAST(NULL AS CHAR), @lc_by = CAST(NULL AS CHAR), @lc_paused = CAST(NULL AS SIGNED),
    @lc_note = CAST(NULL AS CHAR), @lc_paused_by = CAST(NULL AS CHAR),
    @lc_paused_at = CAST(NULL AS CHAR), @lc_until = CAST(NULL AS CHAR);
-- [probe] (once per connection: left out once it passed)
UPDATE lockconsole_runs SET outcome = outcome WHERE 1 = 0;
SELECT id, outcome, instance INTO @lc_claim, @lc_claimed, @lc_by
FROM lockconsole_runs
WHERE @lc_got = 1
  AND %(claims)s
  AND job = %(job)s
  AND slot = %(slot)s
  AND outcome IN ('acquired', 'succeeded')
ORDER BY started_at, id
LIMIT 1;
-- [controls]
SELECT 1, note, paused_by, CAST(paused_at AS CHAR), CAST(paused_until AS CHAR)
INTO @lc_paused, @lc_note, @lc_paused_by, @lc_paused_at, @lc_until
FROM lockconsole_controls
WHERE job = %(job)s
  AND (paused_until IS NULL OR paused_until > %(started_at)s)
LIMIT 1;
SET @lc_outcome = CASE
        WHEN @lc_got IS NOT NULL AND @lc_paused = 1 THEN 'paused'
        WHEN @lc_got = 0 THEN 'skipped'
        WHEN @lc_got IS NULL THEN NULL
        WHEN @lc_claim IS NULL THEN 'acquired'
        WHEN @lc_claimed = 'succeeded' THEN 'skipped'
    END,
    @lc_message = CASE
        WHEN @lc_paused = 1 THEN NULL
        WHEN @lc_got = 0 THEN %(held_message)s
        WHEN @lc_claimed = 'succeeded'
            THEN CONCAT('slot already ran on ', @lc_by, ' (run ', @lc_claim, ', succeeded)')
    END;
INSERT INTO lockconsole_runs ({run_insert_columns})
SELECT {run_insert_decided}
FROM DUAL
WHERE @lc_outcome IN ('acquired', 'skipped');
SELECT JSON_ARRAY(
    @lc_outcome,
    IF(ROW_COUNT() = 1, LAST_INSERT_ID(), NULL),
    IF(@lc_paused = 1, NULL, @lc_claim),
    @lc_message,
    IF((@lc_outcome = 'skipped' AND @lc_claim IS NOT NULL)
           OR (@lc_outcome = 'paused' AND @lc_got = 1),
       RELEASE_LOCK(%(name)s), NULL),
    @lc_got,
    CONNECTION_ID(),
    @lc_note,
    @lc_paused_by,
    @lc_paused_at,
    @lc_until
) AS answer
