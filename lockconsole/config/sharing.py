"""Which jobs lock the same thing: an accidental shared lock is a config error, a
`lock_group` shares one on purpose.

Two jobs share a lock when their effective keys are equal in the same lock space: PostgreSQL
advisory keys per database (pg-session and pg-xact alike; an int64 key and an int4 pair never
meet), MySQL GET_LOCK names per server (they are server-wide), lease rows per table, Redis keys
per server and database number. A name-derived key counts as the number it hashes to, so
`key = 42` on one job and a job whose name hashes to 42 clash too. Two `[databases]` entries
are the same database when their URLs name the same host, port and database.

Jobs that name one `lock_group` share one lock on purpose: a member without `key` takes its key
from the group's name (not its own), and every member must end up on the same lock.
"""

from __future__ import annotations

import os
from collections.abc import Hashable, Mapping

from lockconsole.config.checks import check_job_name
from lockconsole.model import keys
from lockconsole.model.jobs import Database, DatabaseURL, Job, LockKey

_DEFAULT_PORTS = {"postgresql": 5432, "mysql": 3306, "redis": 6379}
_LOCAL_HOSTS = frozenset({"", "localhost", "127.0.0.1", "::1"})
_HOW = "give one of them another key, or name one lock_group on both to share the lock on purpose"

Clash = tuple[str, str, str]  # (job to blame, its config key, the one-line message)


def check_group(value: object) -> str | None:
    """A job's `lock_group`: None, or a name like a job's (it may become the lock's name)."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f'must be a group name like "billing", not {value!r}')
    try:
        return check_job_name(value)
    except ValueError:
        raise ValueError(
            f"{value!r} is not a lock group name (1-64 letters, digits, _ . : -)"
        ) from None


def job_key(name: str, strategy: str, explicit: object, recipe: str, group: str | None) -> LockKey:
    """The job's lock key: `explicit`, else derived from its group's name, else its own name."""
    source = group or name
    if strategy in ("pg-session", "pg-xact"):
        return keys.pg_key_for(source, explicit, recipe)
    return keys.name_key_for(source, explicit)


def _server(url: DatabaseURL) -> tuple[str, int | None]:
    host = (url.host or dict(url.query).get("host") or "").lower()
    return ("localhost" if host in _LOCAL_HOSTS else host), url.port or _DEFAULT_PORTS.get(
        url.dialect
    )


def lock_space(job: Job, database: Database) -> tuple[Hashable, ...]:
    """What the job locks, as one value: equal for two jobs exactly when they exclude each other."""
    url, key = database.url, job.key
    if job.strategy in ("pg-session", "pg-xact"):
        return ("advisory", *_server(url), url.database or url.user, key.kind, key.value)
    if job.strategy == "mysql":
        return ("get_lock", *_server(url), key.value)
    if job.strategy == "redis":
        number = int(url.database) if url.database and url.database.isdigit() else 0
        return ("redis", *_server(url), number, job.redis_prefix + str(key.value))
    name, table = str(key.value), job.lease_table
    if url.dialect == "sqlite":
        return ("lease", "sqlite", os.path.normpath(url.database or ""), table, name)
    if url.dialect == "mysql":  # the name column's collation: case- and trailing-space-blind
        name = name.rstrip(" ").casefold()
    return ("lease", *_server(url), url.database or url.user, table, name)


def describe(job: Job) -> str:
    """What the job locks, for the one line that names a clash."""
    key = job.key
    derived = f", from {key.derived_from}" if key.derived_from else ""
    if job.strategy in ("pg-session", "pg-xact"):
        what = "key pair" if key.kind == "int4pair" else "key"
        return f"advisory {what} {key}{derived} in database {job.database!r}"
    if job.strategy == "mysql":
        return f"GET_LOCK name {str(key)!r} on the server of {job.database!r}"
    if job.strategy == "redis":
        return f"Redis key {job.redis_prefix + str(key)!r} in {job.database!r}"
    return f"lease {str(key)!r} in table {job.lease_table} of {job.database!r}"


def clash(jobs: Mapping[str, Job], databases: Mapping[str, Database]) -> Clash | None:
    """The first pair of jobs that lock one thing without a common lock_group, or the first
    lock_group whose members lock different things; None when there is neither."""
    spaces = {name: lock_space(job, databases[job.database]) for name, job in jobs.items()}
    first_of_group: dict[str, str] = {}
    for name, job in jobs.items():
        if job.lock_group is None:
            continue
        first = first_of_group.setdefault(job.lock_group, name)
        if spaces[first] != spaces[name]:
            return (
                name,
                "lock_group",
                f"jobs {first!r} and {name!r} are in lock_group {job.lock_group!r} but lock "
                f"different things ({first!r}: {describe(jobs[first])}; {name!r}: "
                f"{describe(job)}); give them one key, or leave key out on each: it then "
                "comes from the group's name",
            )
    holder: dict[Hashable, str] = {}
    for name, job in jobs.items():
        first = holder.setdefault(spaces[name], name)
        if first == name:
            continue
        group = jobs[first].lock_group
        if group is not None and group == job.lock_group:
            continue
        return (
            name,
            "key",
            f"jobs {first!r} and {name!r} lock the same {describe(jobs[first])}"
            f"{_also(jobs[first], job)}: only one of them could run at a time; {_HOW}",
        )
    return None


def _also(first: Job, second: Job) -> str:
    """The second job's side of a clash, where its words differ (a derivation, a database)."""
    if describe(first) == describe(second):
        return ""
    return f" ({second.name!r}: {describe(second)})"
