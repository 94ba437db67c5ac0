-- Prune: one batch's whole write in one statement, so its transaction spans one round trip
-- (no BEGIN or COMMIT of its own to wait for): the summaries of the slots that were not plain
-- ok (a JSON array of rows; a slot summarized before keeps its row), then the listed output
-- tails and attempts, each deleted by its key. Answers how many tails and attempts went, and
-- the seconds from the statement's start to its end on the server: how long it held the rows
-- it locked (its commit follows without waiting for the WAL flush).
WITH summaries AS (
    INSERT INTO lockconsole_slot_summaries
        (job, slot, status, attempts, instances, overlap_seconds, first_started_at,
         last_finished_at, pruned_at)
    SELECT job, slot, status, attempts, instances, overlap_seconds, first_started_at,
           last_finished_at, pruned_at
    FROM json_to_recordset(%(summaries)s::json) AS s(
        job text, slot timestamptz, status text, attempts integer, instances integer,
        overlap_seconds double precision, first_started_at timestamptz,
        last_finished_at timestamptz, pruned_at timestamptz)
    ON CONFLICT (job, slot) DO NOTHING
), outputs AS (
    DELETE FROM lockconsole_run_output
    WHERE run_id = ANY(%(ids)s::bigint[])
    RETURNING 1
), runs AS (
    DELETE FROM lockconsole_runs
    WHERE id = ANY(%(ids)s::bigint[])
    RETURNING 1
)
SELECT (SELECT count(*) FROM outputs), (SELECT count(*) FROM runs),
       extract(epoch FROM clock_timestamp() - statement_timestamp())
