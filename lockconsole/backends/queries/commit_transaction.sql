-- Sent in the merged finish's pipeline (savepoint, finish_release_run, COMMIT): psycopg's
-- commit() inside a pipeline syncs at once, and the pipeline's exit would sync again.
COMMIT
