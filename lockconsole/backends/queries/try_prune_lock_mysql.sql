-- One prune at a time per ledger database: a named lock, never waited for. A GET_LOCK name is
-- the whole server's, so it carries the database (cut to keep it within 64 characters: two
-- names that share their first 46 only make their prunes take turns).
SELECT GET_LOCK(CONCAT(%(name)s, ':', LEFT(IFNULL(DATABASE(), ''), 46)), 0)
