-- `lockconsole init`: the server, the account, and the global privileges it holds that matter
-- here (PROCESS to see other accounts' sessions; CONNECTION ADMIN or SUPER to end them).
SELECT VERSION() AS version,
       CURRENT_USER() AS usename,
       DATABASE() AS datname,
       (SELECT GROUP_CONCAT(PRIVILEGE_TYPE SEPARATOR ',') FROM information_schema.USER_PRIVILEGES
        WHERE PRIVILEGE_TYPE IN ('PROCESS', 'SUPER', 'CONNECTION ADMIN', 'CONNECTION_ADMIN')
          AND GRANTEE = CONCAT('''', LEFT(CURRENT_USER(), CHAR_LENGTH(CURRENT_USER())
                                          - CHAR_LENGTH(SUBSTRING_INDEX(CURRENT_USER(), '@', -1))
                                          - 1),
                               '''@''', SUBSTRING_INDEX(CURRENT_USER(), '@', -1), '''')
       ) AS privileges
