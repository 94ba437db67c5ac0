"""The one way the tests write a lockconsole.toml: built as data and written by tomli-w, so a
URL, a path or a command with quotes in it can never break the file. (The bad-config tests that
need malformed TOML on purpose write their text by hand.)

    config_toml(databases={"main": url}, jobs={"nightly": {"database": "main", ...}})
    job_toml(url, "nightly", strategy="pg-xact", stop_grace=2)  # one job on one database
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import tomli_w


def config_toml(
    *,
    databases: Mapping[str, str | Mapping[str, Any]],
    jobs: Mapping[str, Mapping[str, Any]] | None = None,
    **tables: Mapping[str, Any],
) -> str:
    """A configuration's text: `databases` by name (a URL, or the database's whole table),
    `jobs` by name (each job's keys; a nested mapping is a sub-table, as `idempotency`), and
    any other top-level table by its name (lockconsole=..., console=..., ledger=...)."""
    document: dict[str, Any] = {name: dict(table) for name, table in tables.items()}
    document["databases"] = {
        name: {"url": db} if isinstance(db, str) else dict(db) for name, db in databases.items()
    }
    if jobs:
        document["jobs"] = {name: dict(keys) for name, keys in jobs.items()}
    return tomli_w.dumps(document)


def job_toml(
    url: str,
    job: str,
    *,
    strategy: str = "pg-session",
    schedule: str = "0 2 * * *",
    **keys: Any,
) -> str:
    """One job on one database named "main" (at `url`); `keys` are the job's other keys."""
    spec = {"database": "main", "strategy": strategy, "schedule": schedule, **keys}
    return config_toml(databases={"main": url}, jobs={job: spec})


def write_toml(path: Path, text: str) -> Path:
    """Write a configuration's text to `path` and return the path."""
    path.write_text(text, encoding="utf-8")
    return path
