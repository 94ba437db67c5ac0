-- Prune's session: a row lock it would wait for longer than this fails the batch instead.
SET SESSION innodb_lock_wait_timeout = 2
