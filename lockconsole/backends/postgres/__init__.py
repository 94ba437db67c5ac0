"""lockconsole/backends/postgres."""
