{held_advisory_lock:%(pid)s}
