-- One prune at a time per ledger database: a named lock, never waited for.
SELECT GET_LOCK(%(name)s, 0)
