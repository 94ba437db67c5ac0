-- Is MariaDB's METADATA_LOCK_INFO plugin installed (and does it have the columns we read)?
SELECT TABLE_SCHEMA, LOCK_TIME_MS FROM information_schema.METADATA_LOCK_INFO LIMIT 0
