"""lockconsole/config."""
