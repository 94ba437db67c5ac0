-- Issue the next fencing token of one lock from the ledger: one more than the highest it issued
-- before for that lock, and at least %(floor)s (the lock store's own counter), kept as the new
-- high-water mark. The row is locked by the upsert, so two issuers never get the same token.
INSERT INTO lockconsole_fencing AS f (lock_id, token)
VALUES (%(lock_id)s, %(floor)s)
ON CONFLICT (lock_id) DO UPDATE SET token = GREATEST(f.token + 1, EXCLUDED.token)
RETURNING token
