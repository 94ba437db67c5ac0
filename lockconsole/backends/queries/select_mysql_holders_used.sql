-- Fallback: IS_USED_LOCK for each configured name (a JSON array of names), with the holder's
-- PROCESSLIST row where it is visible. Shows no waiters and no unconfigured names.
SELECT u.lock_name,
       1 AS granted,
       NULL AS lock_mode,
       u.connection_id,
       p.USER AS user_name,
       p.HOST AS host,
       p.DB AS db,
       p.COMMAND AS command,
       p.STATE AS state,
       p.TIME AS state_seconds,
       p.INFO AS info,
       NULL AS held_ms,
       NULL AS blocked_by,
       UTC_TIMESTAMP(6) AS now_utc
FROM (
    SELECT jt.lock_name, IS_USED_LOCK(jt.lock_name) AS connection_id
    FROM JSON_TABLE(%(names)s, '$[*]'
                    COLUMNS (lock_name VARCHAR(192) CHARACTER SET utf8mb4 PATH '$')) AS jt
) AS u
LEFT JOIN information_schema.PROCESSLIST p ON p.ID = u.connection_id
WHERE u.connection_id IS NOT NULL
ORDER BY u.lock_name
