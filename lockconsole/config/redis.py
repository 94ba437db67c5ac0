"""Checks of the configuration values of Redis databases and redis jobs (ValueError: why not)."""

from __future__ import annotations

from collections.abc import Mapping

from lockconsole.model.jobs import Database

DEFAULT_SCAN_PREFIXES = ("job-lock:",)  # ShedLock's keys, in every environment


def check_prefix(value: object, what: str = "redis_prefix") -> str:
    """A Redis key prefix: a non-empty string without glob characters or line breaks."""
    if not isinstance(value, str) or not value:
        raise ValueError(f"{what} must be a non-empty string like 'job-lock:default:'")
    bad = sorted({c for c in value if c in "*?[]\\" or not c.isprintable()})
    if bad:
        raise ValueError(f"{what} {value!r} must not contain {''.join(bad)!r}")
    return value


def scan_prefixes(value: object) -> tuple[str, ...]:
    """[databases.NAME] scan_prefixes: a list of key prefixes listed as holders."""
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not value:
        raise ValueError('must be a list of key prefixes, like ["job-lock:", "laravel_cache_"]')
    return tuple(check_prefix(v, "a scan prefix") for v in value)


def ledger_problem(databases: Mapping[str, Database], ledger: str | None) -> str | None:
    """Why the ledger setting does not fit Redis databases (the ledger and audit stay in SQL)."""
    if ledger is not None and databases[ledger].url.dialect == "redis":
        return f"{ledger!r} is a Redis database: the ledger needs PostgreSQL, MySQL or SQLite"
    redis = sorted(n for n, d in databases.items() if d.url.dialect == "redis")
    if redis and ledger is None:
        return (
            f"missing: Redis database {redis[0]!r} keeps no ledger or audit; name a SQL "
            'database here (ledger_database = "...")'
        )
    return None
