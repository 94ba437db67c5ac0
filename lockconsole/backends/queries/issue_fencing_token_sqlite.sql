-- Issue the next fencing token of one lock from the ledger: one more than the highest it issued
-- before for that lock, and at least %(floor)s (the lock store's own counter), kept as the new
-- high-water mark (SQLite 3.35 or later: ON CONFLICT ... DO UPDATE ... RETURNING).
INSERT INTO lockconsole_fencing (lock_id, token)
VALUES (%(lock_id)s, %(floor)s)
ON CONFLICT (lock_id) DO UPDATE SET token = MAX(lockconsole_fencing.token + 1, excluded.token)
RETURNING token
