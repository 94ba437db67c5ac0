"""lockconsole/cli."""
