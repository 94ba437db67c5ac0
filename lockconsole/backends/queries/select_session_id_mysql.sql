-- The lock connection's own session id, as KILL and IS_USED_LOCK name it.
SELECT CONNECTION_ID()
