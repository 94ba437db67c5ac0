"""lockconsole/backends/lease."""
