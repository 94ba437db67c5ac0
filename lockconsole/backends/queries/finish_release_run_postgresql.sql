-- Finish and release one attempt in one statement: the lock's last check (pg_locks: this backend
-- still holds the key), the outcome written only while the row is still "acquired" by this
-- instance and process ("lock_lost" if the check failed), then, when %(release)s and the lock was
-- held, the session lock handed to a transaction-level hold of the same key and let go: the key
-- stays held until this statement's transaction commits, so whoever takes it next sees the outcome.
-- With %(in_transaction)s (pg-xact: the statement runs inside the transaction that holds the
-- key, which a lost session or an ended transaction would have failed before it) the key is held
-- by construction, and pg_locks is not read: OR stops at the true.
-- The outcome's finished_at / exit_code / message are taken as given. With %(async_commit)s (the
-- job's ledger_commit = "async"), the transaction commits without waiting for the WAL flush.
WITH checked AS MATERIALIZED (
    {held_advisory_lock:pg_backend_pid()} AS held
),
held AS MATERIALIZED (
    SELECT %(in_transaction)s::boolean OR (SELECT held FROM checked) AS held
),
closed AS (
    UPDATE lockconsole_runs
    SET outcome = CASE WHEN (SELECT held FROM held) THEN %(outcome)s ELSE 'lock_lost' END,
        finished_at = %(finished_at)s,
        exit_code = %(exit_code)s,
        message = CASE WHEN (SELECT held FROM held) THEN %(message)s ELSE %(lost_message)s END
    WHERE id = %(id)s
      AND outcome = 'acquired'
      AND instance = %(instance)s
      AND pid = %(pid)s
    RETURNING outcome
)
SELECT h.held,
       (SELECT outcome FROM closed),
       CASE
           WHEN (SELECT count(*) FROM closed) < 0 THEN NULL
           WHEN NOT %(release)s::boolean OR NOT h.held THEN NULL
           WHEN CASE
                    WHEN %(key1)s::integer IS NULL THEN pg_try_advisory_xact_lock(%(key)s::bigint)
                    ELSE pg_try_advisory_xact_lock(%(key1)s::integer, %(key2)s::integer)
                END
               THEN CASE
                    WHEN %(key1)s::integer IS NULL THEN pg_advisory_unlock(%(key)s::bigint)
                    ELSE pg_advisory_unlock(%(key1)s::integer, %(key2)s::integer)
                END
           ELSE false
       END,
       CASE WHEN %(async_commit)s::boolean THEN set_config('synchronous_commit', 'off', true) END
FROM held h
