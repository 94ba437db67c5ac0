-- The server's own time now, as timestamptz (the ledger's one clock).
SELECT clock_timestamp()
