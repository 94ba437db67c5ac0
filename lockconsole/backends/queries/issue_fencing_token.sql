-- Issue the next fencing token of one lock from the ledger (MySQL, MariaDB): one more than the
-- highest it issued before for that lock, and at least %(floor)s (the lock store's own counter),
-- kept as the new high-water mark. LAST_INSERT_ID(expr) hands the token back in the OK packet
-- (cursor.lastrowid), so it is one statement and one round trip.
INSERT INTO lockconsole_fencing (lock_id, token)
VALUES (%(lock_id)s, LAST_INSERT_ID(%(floor)s))
ON DUPLICATE KEY UPDATE token = LAST_INSERT_ID(GREATEST(token + 1, %(floor)s))
