-- Decide and record one attempt in one statement, after the try-lock (sent in the same round trip,
-- which leaves its result in the transaction-local setting lockconsole.got: 'true', 'false', or
-- 'guard' when the pooler guard stopped it; or given as %(got)s when the lock is elsewhere; a
-- lease's fencing token in lockconsole.token).
-- The statement starts after the try-lock returned, so its snapshot sees every attempt that
-- committed before the lock was let go. It records "acquired" when the lock was got and no attempt
-- claims the slot, "skipped" when the lock was held or the slot already succeeded (and, when the
-- lock is on this connection, %(here)s, lets the lock go again), and nothing (outcome NULL) when the
-- guard stopped the try or an earlier attempt of the slot is still "acquired": the runner then
-- goes on one statement at a time. The UPDATE that changes no row fails the whole statement when
-- this role could record an attempt but never close it.
-- [controls] the job's control row (a pause in force at the attempt's start), read with the same
-- snapshot: when the try was answered (got or not), the verdict is "paused", nothing is inserted,
-- the lock (taken on this connection, %(here)s) is let go, and the pause's columns are answered so
-- the runner records the paused attempt with the pause's own words.
-- [commit] A "skipped" verdict turns synchronous_commit off for this transaction only: the skip is
-- visible at once and does not wait for the WAL flush (a crash of the server can take it back, and
-- with it nothing that decides a run: no job ran). An "acquired" row always waits: the job never
-- starts on a row that a crash of the server could take back.
-- The column lists come from RUN_COLUMNS (see sqlfiles.run_column_lists).
WITH tried AS MATERIALIZED (
    SELECT COALESCE(%(got)s::text, current_setting('lockconsole.got', true)) AS got
),
claim AS MATERIALIZED (
    SELECT id, instance, outcome
    FROM lockconsole_runs
    WHERE %(claims)s::boolean
      AND (SELECT got FROM tried) = 'true'
      AND job = %(job)s
      AND slot = %(slot)s
      AND outcome IN ('acquired', 'succeeded')
    ORDER BY started_at, id
    LIMIT 1
),
-- [controls]
control AS MATERIALIZED (
    SELECT note, paused_by, paused_at, paused_until
    FROM lockconsole_controls
    WHERE job = %(job)s
      AND (paused_until IS NULL OR paused_until > %(started_at)s::timestamptz)
    LIMIT 1
),
verdict AS MATERIALIZED (
    SELECT CASE
               WHEN t.got IN ('true', 'false') AND p.paused_at IS NOT NULL THEN 'paused'
               WHEN t.got = 'false' THEN 'skipped'
               WHEN t.got <> 'true' OR t.got IS NULL THEN NULL
               WHEN c.id IS NULL THEN 'acquired'
               WHEN c.outcome = 'succeeded' THEN 'skipped'
           END AS outcome,
           CASE
               WHEN p.paused_at IS NOT NULL THEN NULL
               WHEN t.got = 'false' THEN %(held_message)s
               WHEN c.outcome = 'succeeded'
                   THEN 'slot already ran on ' || c.instance || ' (run ' || c.id || ', succeeded)'
           END AS message,
           CASE WHEN p.paused_at IS NULL THEN c.id END AS claim_id,
           t.got AS got,
           p.note, p.paused_by, p.paused_at, p.paused_until
    FROM tried t
    LEFT JOIN claim c ON true
    LEFT JOIN control p ON true
),
may_close AS (
    UPDATE lockconsole_runs
    SET outcome = outcome, finished_at = finished_at, exit_code = exit_code, message = message
    WHERE 1 = 0
),
decided AS MATERIALIZED (
    SELECT outcome,
           message,
           CASE WHEN outcome = 'skipped' THEN %(finished_at)s::timestamptz END AS finished_at,
           COALESCE(%(session_id)s::bigint, CASE WHEN %(here)s::boolean THEN pg_backend_pid() END)
               AS session_id,
           CASE WHEN outcome = 'acquired' THEN COALESCE(
               %(fencing_token)s::bigint,
               NULLIF(current_setting('lockconsole.token', true), '')::bigint
           ) END AS fencing_token
    FROM verdict
    WHERE outcome IN ('acquired', 'skipped')
),
recorded AS (
    INSERT INTO lockconsole_runs ({run_insert_columns})
    SELECT {run_insert_decided}
    FROM decided
    RETURNING id
)
SELECT v.outcome,
       (SELECT id FROM recorded),
       v.claim_id,
       v.message,
       CASE
           WHEN (SELECT count(*) FROM recorded) < 0 THEN NULL
           WHEN %(here)s::boolean AND (
                   (v.outcome = 'skipped' AND v.claim_id IS NOT NULL)
                   OR (v.outcome = 'paused' AND v.got = 'true')
               )
               THEN CASE
                   WHEN %(key1)s::integer IS NULL THEN pg_advisory_unlock(%(key)s::bigint)
                   ELSE pg_advisory_unlock(%(key1)s::integer, %(key2)s::integer)
               END
       END,
       v.note,
       v.paused_by,
       v.paused_at,
       v.paused_until,
       CASE
           WHEN v.outcome = 'skipped' THEN set_config('synchronous_commit', 'off', true)
       END,
       inet_server_port(),
       inet_client_port()
FROM verdict v
