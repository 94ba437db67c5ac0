{held_advisory_lock:pg_backend_pid()}
