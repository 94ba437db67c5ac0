"""lockconsole/model."""
