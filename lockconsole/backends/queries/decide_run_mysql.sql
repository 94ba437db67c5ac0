-- Decide and record one attempt in one round trip on the lock's own connection (statements sent
-- together; autocommit, so each statement reads what committed before it started): the try-lock,
-- the probe that fails at once when this role could record an attempt but never close it, the
-- verdict (one SELECT, started after GET_LOCK took the lock: the slot's claim and [controls] the
-- job's control row, a pause in force at the attempt's start), the INSERT of "acquired" or
-- "skipped" (none when an earlier attempt of the slot is still "acquired": the runner then goes
-- on one statement at a time), and the answer, which lets the lock go when the slot already
-- succeeded. A pause: when GET_LOCK answered, the verdict is "paused", nothing is inserted, the
-- lock is let go, and the pause's fields are answered so the runner records the paused attempt in
-- its own words. The answer is one JSON array (one column to read): outcome, the new row's id,
-- the claim's id, the message, RELEASE_LOCK's result, GET_LOCK's, CONNECTION_ID(), then the
-- pause's note, paused_by, paused_at and paused_until (NULL unless paused; the times as text).
-- The column lists come from RUN_COLUMNS (see sqlfiles.run_column_lists).
SET @lc_got = GET_LOCK(%(name)s, 0);
UPDATE lockconsole_runs SET outcome = outcome WHERE 1 = 0;
SELECT CASE
           WHEN @lc_got IS NOT NULL AND pause.paused = 1 THEN 'paused'
           WHEN @lc_got = 0 THEN 'skipped'
           WHEN @lc_got IS NULL THEN NULL
           WHEN claim.id IS NULL THEN 'acquired'
           WHEN claim.outcome = 'succeeded' THEN 'skipped'
       END,
       CASE
           WHEN pause.paused = 1 THEN NULL
           WHEN @lc_got = 0 THEN %(held_message)s
           WHEN claim.outcome = 'succeeded'
               THEN CONCAT('slot already ran on ', claim.instance, ' (run ', claim.id, ', succeeded)')
       END,
       IF(pause.paused = 1, NULL, claim.id),
       pause.note,
       pause.paused_by,
       CAST(pause.paused_at AS CHAR),
       CAST(pause.paused_until AS CHAR)
INTO @lc_outcome, @lc_message, @lc_claim, @lc_note, @lc_paused_by, @lc_paused_at, @lc_until
FROM (SELECT 1 AS one) AS answered
LEFT JOIN (
    SELECT id, outcome, instance
    FROM lockconsole_runs
    WHERE @lc_got = 1
      AND %(claims)s
      AND job = %(job)s
      AND slot = %(slot)s
      AND outcome IN ('acquired', 'succeeded')
    ORDER BY started_at, id
    LIMIT 1
) AS claim ON TRUE
-- [controls]
LEFT JOIN (
    SELECT 1 AS paused, note, paused_by, paused_at, paused_until
    FROM lockconsole_controls
    WHERE job = %(job)s
      AND (paused_until IS NULL OR paused_until > %(started_at)s)
    LIMIT 1
) AS pause ON TRUE;
INSERT INTO lockconsole_runs ({run_insert_columns})
SELECT {run_insert_decided}
FROM (
    SELECT @lc_outcome AS outcome,
           @lc_message AS message,
           IF(@lc_outcome = 'skipped', %(finished_at)s, NULL) AS finished_at,
           CONNECTION_ID() AS session_id,
           %(fencing_token)s AS fencing_token
) decided
WHERE decided.outcome IN ('acquired', 'skipped');
SELECT JSON_ARRAY(
    @lc_outcome,
    IF(ROW_COUNT() = 1, LAST_INSERT_ID(), NULL),
    @lc_claim,
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
