"""lockconsole/console."""
