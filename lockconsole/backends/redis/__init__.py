"""lockconsole/backends/redis."""
