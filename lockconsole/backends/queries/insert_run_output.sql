-- Keep the output tail of one finished run (its stdout and stderr, or its traceback).
INSERT INTO lockconsole_run_output (run_id, output)
VALUES (%(run_id)s, %(output)s)
