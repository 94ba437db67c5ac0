"""A job's `[jobs.NAME.idempotency]` table: the business table and key its effects are kept once
by (its rows claimed per key), and the column that names the run which claimed each."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from lockconsole.config.checks import check_column, check_identifier
from lockconsole.model.errors import ConfigError
from lockconsole.model.jobs import Idempotency

KEYS = {"table", "key", "run_column"}


def parse_idempotency(
    spec: dict[str, Any], error: Callable[[str | None, str], ConfigError]
) -> Idempotency:
    """The table's Idempotency; `error(key, message)` is the ConfigError raised for a bad key
    (None: the table itself)."""
    if "table" not in spec or "key" not in spec:
        raise error(None, "needs 'table' and 'key'")
    try:
        table = check_identifier(spec["table"])
    except ValueError as exc:
        raise error("table", str(exc)) from None
    cols = spec["key"]
    if isinstance(cols, str):
        cols = [cols]
    if not isinstance(cols, list) or not cols:
        raise error("key", 'must be a list of column names, like ["tenant_id"]')
    try:
        key = tuple(check_column(c) for c in cols)
    except ValueError as exc:
        raise error("key", str(exc)) from None
    if len(set(key)) != len(key):
        raise error("key", "lists a column twice")
    run_column = spec.get("run_column")
    if run_column is not None:
        try:
            check_column(run_column)
        except ValueError as exc:
            raise error("run_column", str(exc)) from None
    return Idempotency(table, key, run_column)
