-- The server's own time now, naive UTC with microseconds (the ledger's one clock).
SELECT UTC_TIMESTAMP(6)
