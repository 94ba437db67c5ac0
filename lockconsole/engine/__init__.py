"""lockconsole/engine."""
