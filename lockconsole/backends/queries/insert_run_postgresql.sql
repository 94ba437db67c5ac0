-- Record one attempt in the run ledger; return its id, and the ports that tell a direct connection.
INSERT INTO lockconsole_runs
    (job, slot, instance, host, pid, "trigger", outcome, started_at, finished_at, exit_code,
     message, fencing_token, session_id, strategy, lock_key)
VALUES
    (%(job)s, %(slot)s, %(instance)s, %(host)s, %(pid)s, %(trigger)s, %(outcome)s,
     %(started_at)s, %(finished_at)s, %(exit_code)s, %(message)s, %(fencing_token)s,
     %(session_id)s, %(strategy)s, %(lock_key)s)
RETURNING id, inet_server_port(), inet_client_port()
