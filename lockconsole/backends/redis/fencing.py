"""Fencing tokens of Redis locks, issued by the SQL ledger so that they never go backwards.

Redis's own counter (`lockconsole:fencing:<key>`) is lost with a FLUSHALL, or with a restart
of a server without persistence: the next holder would count from 1 again while an old holder
still carries a higher token. The ledger's `lockconsole_fencing` table keeps, per lock, the
highest token issued; one statement (an upsert, atomic on its row) issues
max(that + 1, Redis's counter) and keeps it as the new high-water mark. Redis's counter is the
floor so that tokens go on from where a deployment's counter was before the ledger kept them;
the lock then writes the token back to that counter, so each store knows the other's mark.

A lock's row is named after its Redis key (`redis:<prefix><name>`), not the server's address:
moving the locks to another Redis server keeps their sequence.
"""

from __future__ import annotations

import hashlib
from typing import Any, Protocol

MAX_LOCK_ID = 255  # characters of lockconsole_fencing.lock_id


class TokenIssuer(Protocol):
    """Whatever can issue a lock's next fencing token (the run ledger does)."""

    def insert(self, query: str, params: dict[str, Any]) -> Any:
        """Run one INSERT query file; the value it returns (here: the token)."""


def lock_id(key: str) -> str:
    """The ledger's name for the lock on Redis key `key` (a digest when it is too long)."""
    name = "redis:" + key
    if len(name) <= MAX_LOCK_ID:
        return name
    return "redis-sha256:" + hashlib.sha256(key.encode("utf-8", "surrogateescape")).hexdigest()


def issue(ledger: TokenIssuer, key: str, floor: int) -> int:
    """The next fencing token of the lock on `key`: above every one issued before, >= floor."""
    token = ledger.insert("issue_fencing_token", {"lock_id": lock_id(key), "floor": max(floor, 1)})
    return int(token)
