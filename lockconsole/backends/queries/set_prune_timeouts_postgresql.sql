-- Prune's session: a row lock it would wait for longer than this fails the batch instead; and
-- a batch's commit does not wait for its WAL flush, so its row locks go as soon as it is
-- written. A crash may then forget the last batches whole (each is one transaction: its
-- summaries and its deletions together), whose rows the next prune takes again; any durable
-- commit on the server after them, such as the prune's audit row, flushes them too.
SELECT set_config('lock_timeout', '2s', false), set_config('synchronous_commit', 'off', false)
