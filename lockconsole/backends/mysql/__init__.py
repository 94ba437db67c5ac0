"""lockconsole/backends/mysql."""
