"""The run ledger's timestamps: aware UTC datetimes in, each dialect's stored form out."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

_SQLITE_FORMAT = "%Y-%m-%d %H:%M:%S.%f"


def to_db(value: datetime | None, dialect: str) -> Any:
    """An aware datetime in the form the ledger stores for `dialect` (see the module doc)."""
    if value is None:
        return None
    if value.__class__ is datetime and value.tzinfo is UTC and dialect == "postgresql":
        return value  # the run path's usual case (the server's clock, read as UTC): as it is
    if not isinstance(value, datetime):
        raise TypeError(f"expected a datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"naive datetime {value.isoformat()}: the ledger needs an aware one")
    utc = value.astimezone(UTC)
    if dialect == "postgresql":
        return utc
    if dialect == "mysql":
        return utc.replace(tzinfo=None)
    return utc.strftime(_SQLITE_FORMAT)


def from_db(value: Any) -> datetime | None:
    """A stored timestamp (any dialect's form) as an aware UTC datetime."""
    if value is None:
        return None
    if isinstance(value, str):
        value = datetime.fromisoformat(value)
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)
