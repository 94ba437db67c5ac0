-- Be woken when a run request is queued.
LISTEN lockconsole_requests
