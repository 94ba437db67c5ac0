"""Counters of the audited actions: force-releases (by the database acted on) and run requests
(by job), read from the audit log through the console, once per scrape.

The same rules as the ledger's counters (metrics/counters.py): they start at 0 with the process
(the rows already in an audit table at its first read are taken as counted), each audit row
counts once, when it is first seen, and the series of a database whose audit table this scrape
could not read are left out, not kept. The audit read has no time budget of its own, so it runs
on a thread of its own and a scrape waits for it only `wait` seconds: a read still running
leaves every audit counter out (unknown) and is waited for again by the next scrape, never
started twice.
"""

from __future__ import annotations

import threading
from collections import Counter
from datetime import datetime
from typing import TYPE_CHECKING, Any

from lockconsole.backends.threads import start_quiet
from lockconsole.config.loader import Config
from lockconsole.metrics.figures import Figure

if TYPE_CHECKING:
    from lockconsole.backends.audit import AuditEntry
    from lockconsole.console.protocol import ConsoleFacade

LIMIT = 1000  # audit rows read per scrape (newest first, within the lookback)
REQUESTS = frozenset({"request", "request_forced"})
Answer = tuple[list["AuditEntry"], list[tuple[str, str]]] | BaseException


class AuditRead:
    """One audit read on a daemon thread (a hung database never holds the process's exit)."""

    def __init__(self, console: ConsoleFacade, since: datetime) -> None:
        self.done = threading.Event()
        self.answer: Answer | None = None
        thread = threading.Thread(
            target=self._run, args=(console, since), name="lockconsole-audit", daemon=True
        )
        start_quiet(thread)

    def _run(self, console: ConsoleFacade, since: datetime) -> None:
        try:
            self.answer = console.audit(since=since, limit=LIMIT)
        except BaseException as exc:  # kept for the scrape to see: the tables are unknown
            self.answer = exc
        finally:
            self.done.set()


class AuditCounters:
    """Force-releases and run requests counted from the audit tables, advanced per scrape."""

    def __init__(self, config: Config, *, wait: float = 5.0) -> None:
        self.config = config
        self.wait = wait
        self.homes: set[str] = {h for h in map(self.home_of, config.databases) if h is not None}
        self.releases: Counter[str] = Counter({n: 0 for n in config.databases if self.home_of(n)})
        self.requests: Counter[str] = Counter({job: 0 for job in config.jobs})
        self.unread: set[str] = set(self.homes)  # homes the last read did not read
        self._read: set[str] = set()  # homes read at least once: their first read is the base
        self._seen: dict[tuple[str, int], datetime] = {}  # (home, audit id) -> its time
        self._outstanding: AuditRead | None = None

    def home_of(self, database: str) -> str | None:
        """The database whose audit table records actions on `database` (Redis: the ledger's)."""
        db = self.config.databases.get(database)
        if db is None or db.url.dialect != "redis":
            return database if db is not None else None
        return self.config.ledger_database

    def advance(self, console: ConsoleFacade, since: datetime) -> None:
        """Read the audit tables (or wait on the read still running) and count new rows."""
        if self._outstanding is None:
            self._outstanding = AuditRead(console, since)
        read = self._outstanding
        if not read.done.wait(self.wait):
            self.unread = set(self.homes)
            return
        self._outstanding = None
        answer = read.answer
        if answer is None or isinstance(answer, BaseException):
            self.unread = set(self.homes)
            return
        entries, errors = answer
        unread = {name for name, _ in errors}
        for entry in entries:
            home = self.home_of(entry.database)
            if home is None or home in unread or (home, entry.id) in self._seen:
                continue
            self._seen[home, entry.id] = entry.at
            if home not in self._read:
                continue  # there before this process's first read of it: the base
            if entry.action == "release":
                self.releases[entry.database] += 1
            elif (
                entry.action in REQUESTS and entry.job is not None and entry.job in self.config.jobs
            ):
                self.requests[entry.job] += 1
        self._read |= self.homes - unread
        for key in [k for k, at in self._seen.items() if at < since]:
            del self._seen[key]
        self.unread = set(unread)

    def state(self) -> dict[str, Any]:
        """Everything needed to go on from here in another process, as JSON values."""
        return {
            "releases": dict(self.releases),
            "requests": dict(self.requests),
            "read": sorted(self._read),
            "seen": [[home, i, at.isoformat()] for (home, i), at in self._seen.items()],
        }

    def restore(self, state: dict[str, Any]) -> None:
        """Go on from `state()` of an earlier process (raises on anything malformed)."""
        self.releases.update({str(k): int(v) for k, v in state["releases"].items()})
        self.requests.update({str(k): int(v) for k, v in state["requests"].items()})
        self._read = {str(h) for h in state["read"]} & self.homes
        self._seen = {(str(h), int(i)): datetime.fromisoformat(at) for h, i, at in state["seen"]}

    def figures(self) -> list[Figure]:
        """The counters of the databases whose audit table this scrape read."""
        releases = Figure(
            "force_releases",
            "Force-releases audited since this exporter started, by the database acted on",
            ("database",),
            kind="counter",
        )
        for database, count in sorted(self.releases.items()):
            if self.home_of(database) not in self.unread:  # a home always: see __init__
                releases.add((database,), count)
        requests = Figure(
            "requests",
            "Run requests (run now, rerun a slot) audited since this exporter started",
            ("job_name",),
            kind="counter",
        )
        for job, count in sorted(self.requests.items()):
            home = self.home_of(self.config.ledger_for(self.config.jobs[job]).name)
            if home is not None and home not in self.unread:
                requests.add((job,), count)
        return [releases, requests]
