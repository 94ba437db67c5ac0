-- MariaDB's METADATA_LOCK_INFO plugin: granted user locks only (the name is in TABLE_SCHEMA);
-- waiters are the PROCESSLIST threads in state 'User lock' (their name is in INFO's text).
SELECT m.TABLE_SCHEMA AS lock_name,
       1 AS granted,
       m.LOCK_MODE AS lock_mode,
       m.THREAD_ID AS connection_id,
       p.USER AS user_name,
       p.HOST AS host,
       p.DB AS db,
       p.COMMAND AS command,
       p.STATE AS state,
       p.TIME AS state_seconds,
       p.INFO AS info,
       m.LOCK_TIME_MS AS held_ms,
       NULL AS blocked_by,
       UTC_TIMESTAMP(6) AS now_utc
FROM information_schema.METADATA_LOCK_INFO m
LEFT JOIN information_schema.PROCESSLIST p ON p.ID = m.THREAD_ID
WHERE m.LOCK_TYPE = 'User lock'
UNION ALL
SELECT NULL, 0, NULL, p.ID, p.USER, p.HOST, p.DB, p.COMMAND, p.STATE, p.TIME, p.INFO, NULL,
       NULL, UTC_TIMESTAMP(6)
FROM information_schema.PROCESSLIST p
WHERE p.STATE = 'User lock'
