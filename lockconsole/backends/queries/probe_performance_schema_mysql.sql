-- Can this account read performance_schema's metadata locks, and is the MDL instrument on?
SELECT (SELECT ENABLED FROM performance_schema.setup_instruments
        WHERE NAME = 'wait/lock/metadata/sql/mdl') AS mdl_enabled,
       (SELECT COUNT(*) FROM performance_schema.metadata_locks WHERE 1 = 0) AS locks_readable,
       (SELECT COUNT(*) FROM performance_schema.threads WHERE 1 = 0) AS threads_readable
