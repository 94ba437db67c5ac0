-- Finish and release one attempt in one round trip on the lock's own connection, in two
-- statements (each answer the server sends is one more wait of the client's): the UPDATE writes
-- the outcome only while the row is still "acquired" by this instance and process, as asked while
-- the lock's last check (IS_USED_LOCK = CONNECTION_ID()) finds it held, else "lock_lost"; it is
-- committed by autocommit before the answer, which makes the check again and lets the lock go
-- when held. Nothing but the end of this connection takes its GET_LOCK lock from it, so the two
-- checks agree. The answer is one JSON array (one column to read): the rows the UPDATE changed,
-- and RELEASE_LOCK's result, NULL when the check failed (no RELEASE_LOCK then).
UPDATE lockconsole_runs
SET outcome = IF(COALESCE(IS_USED_LOCK(%(name)s) = CONNECTION_ID(), 0), %(outcome)s, 'lock_lost'),
    finished_at = %(finished_at)s,
    exit_code = %(exit_code)s,
    message = IF(COALESCE(IS_USED_LOCK(%(name)s) = CONNECTION_ID(), 0), %(message)s,
                 %(lost_message)s)
WHERE id = %(id)s
  AND outcome = 'acquired'
  AND instance = %(instance)s
  AND pid = %(pid)s;
SELECT JSON_ARRAY(
    ROW_COUNT(),
    IF(COALESCE(IS_USED_LOCK(%(name)s) = CONNECTION_ID(), 0), RELEASE_LOCK(%(name)s), NULL)
) AS answer
