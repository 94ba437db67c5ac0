"""lockconsole/backends/ledger."""
