"""What a snapshot reads and judges: each ledger's view (`ledger_view.py`), slot reports and
alerts (`reports.py`), stale holders (`stale.py`), and how long a lock has been held where the
database does not say (`held.py`). The facade puts them together in `Console.snapshot()`."""
