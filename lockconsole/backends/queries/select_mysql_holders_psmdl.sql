-- User-level lock holders and waiters from performance_schema (MySQL 8; MariaDB >= 10.5.2
-- with performance_schema=ON). One GRANTED row per held name, one PENDING row per waiter.
SELECT ml.OBJECT_NAME AS lock_name,
       ml.LOCK_STATUS = 'GRANTED' AS granted,
       ml.LOCK_TYPE AS lock_mode,
       t.PROCESSLIST_ID AS connection_id,
       t.PROCESSLIST_USER AS user_name,
       t.PROCESSLIST_HOST AS host,
       t.PROCESSLIST_DB AS db,
       t.PROCESSLIST_COMMAND AS command,
       t.PROCESSLIST_STATE AS state,
       t.PROCESSLIST_TIME AS state_seconds,
       t.PROCESSLIST_INFO AS info,
       NULL AS held_ms,
       CASE WHEN ml.LOCK_STATUS = 'GRANTED' THEN NULL ELSE IS_USED_LOCK(ml.OBJECT_NAME) END
           AS blocked_by,
       UTC_TIMESTAMP(6) AS now_utc
FROM performance_schema.metadata_locks ml
JOIN performance_schema.threads t ON t.THREAD_ID = ml.OWNER_THREAD_ID
WHERE ml.OBJECT_TYPE = 'USER LEVEL LOCK'
  AND ml.LOCK_STATUS IN ('GRANTED', 'PENDING')
ORDER BY ml.OBJECT_NAME, granted DESC, t.PROCESSLIST_ID
