-- Back to the merged finish's savepoint: the lock, taken before it, is still held.
ROLLBACK TO SAVEPOINT lockconsole_finish
