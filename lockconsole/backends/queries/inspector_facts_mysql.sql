-- Once per inspector: server flavour, performance_schema switch, and whether this account has
-- PROCESS (without it, other accounts' threads are hidden from PROCESSLIST).
SELECT VERSION() AS version,
       @@performance_schema AS performance_schema,
       (SELECT COUNT(*) FROM information_schema.USER_PRIVILEGES
        WHERE PRIVILEGE_TYPE = 'PROCESS'
          AND GRANTEE = CONCAT('''', LEFT(CURRENT_USER(), CHAR_LENGTH(CURRENT_USER())
                                          - CHAR_LENGTH(SUBSTRING_INDEX(CURRENT_USER(), '@', -1))
                                          - 1),
                               '''@''', SUBSTRING_INDEX(CURRENT_USER(), '@', -1), '''')
       ) > 0 AS has_process
