"""lockconsole/tui/widgets."""
