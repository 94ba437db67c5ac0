-- Finish and release a lease in one statement: {released} is the lease's own release (ShedLock's
-- unlock, only while the row is still ours and unexpired, returning it); the outcome is written
-- only while the attempt is still "acquired" by this instance and process, and "lock_lost" when
-- the lease was no longer ours. Both commit together; with %(async_commit)s (the job's
-- ledger_commit = "async") without waiting for the WAL flush.
WITH released AS (
    {released}
),
closed AS (
    UPDATE lockconsole_runs
    SET outcome = CASE WHEN EXISTS (SELECT 1 FROM released) THEN %(outcome)s ELSE 'lock_lost' END,
        finished_at = %(finished_at)s,
        exit_code = %(exit_code)s,
        message = CASE
            WHEN EXISTS (SELECT 1 FROM released) THEN %(message)s
            ELSE %(lost_message)s
        END
    WHERE id = %(id)s
      AND outcome = 'acquired'
      AND instance = %(instance)s
      AND pid = %(pid)s
    RETURNING outcome
)
SELECT EXISTS (SELECT 1 FROM released),
       (SELECT outcome FROM closed),
       CASE WHEN %(async_commit)s::boolean THEN set_config('synchronous_commit', 'off', true) END
