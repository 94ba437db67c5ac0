-- Prune's session: a row lock it would wait for longer than this fails the batch instead.
SET lock_timeout = '2s'
