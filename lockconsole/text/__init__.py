"""lockconsole/text."""
