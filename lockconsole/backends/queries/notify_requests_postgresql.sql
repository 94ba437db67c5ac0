-- Wake the instances that LISTEN for run requests (the payload is the job's name).
SELECT pg_notify('lockconsole_requests', %(job)s)
