"""How old the data on screen is: one answer for the status line, the banner, the pane titles
and the alert badge (pure: no Textual, no I/O).

A database's data is as old as the last refresh that read it. It is "ok" only while that is
recent (within the refresh interval and some slack): a database that hangs keeps its last
data on screen, counted old from the first second it is late, before any error is known.
An alert is old when a source it was worked out from could not be read in the last refresh:
it stays (carried over by `carry_over.carry_over`) and is counted as old.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from lockconsole.model.views import Alert
from lockconsole.text.times import age

if TYPE_CHECKING:
    from lockconsole.config.loader import Config

SLACK = 2.0  # seconds a refresh may be late (it takes time itself) before its data is old
REFRESH = "refresh"  # the error key of a refresh that failed as a whole: every source is old


@dataclass(frozen=True)
class Freshness:
    """Which sources are old, and since when their data is good."""

    now: datetime
    last_good: Mapping[str, datetime] = field(default_factory=dict)  # source -> its last read
    down: frozenset[str] = frozenset()  # sources with an error in the last refresh
    fresh_for: timedelta = timedelta(seconds=SLACK)  # how long a read stays fresh
    ledger_of: Mapping[str, str] = field(default_factory=dict)  # job -> its ledger database
    database_of: Mapping[str, str] = field(default_factory=dict)  # job -> its lock database

    def good_since(self, name: str) -> datetime | None:
        """When `name`'s data on screen was read (None: never)."""
        if REFRESH in self.down:
            return min(self.last_good.values(), default=None)
        return self.last_good.get(name)

    def is_down(self, name: str) -> bool:
        return name in self.down or REFRESH in self.down

    def is_old(self, name: str) -> bool:
        """Down, or not read within `fresh_for`: its data must not be called ok."""
        if self.is_down(name):
            return True
        good = self.last_good.get(name)
        return good is None or self.now - good > self.fresh_for

    def oldest(self, names: Iterable[str] | None = None) -> datetime | None:
        """When the oldest data of `names` (default: every source read) was read."""
        chosen = list(self.last_good) if names is None else list(names)
        found = [g for n in chosen if (g := self.good_since(n)) is not None]
        return min(found, default=None)

    def age_note(self, names: Iterable[str]) -> str:
        """' — 35s old' when some of `names` is old, else ''."""
        old = [n for n in names if self.is_old(n)]
        if not old:
            return ""
        since = self.oldest(old)
        return f" — {age(since, self.now)} old" if since is not None else " — unknown"

    def alert_sources(self, alert: Alert) -> set[str]:
        """The databases an alert was worked out from (empty: it cannot say)."""
        return alert_sources(alert, self.ledger_of, self.database_of)

    def alert_is_old(self, alert: Alert) -> bool:
        sources = self.alert_sources(alert) or set(self.ledger_of.values())
        return any(self.is_old(s) for s in sources)


def alert_sources(
    alert: Alert, ledger_of: Mapping[str, str], database_of: Mapping[str, str]
) -> set[str]:
    """The databases an alert comes from: its database, else its job's ledger (and, for an
    abandoned attempt, the job's lock database too); empty when it names neither."""
    if alert.database:
        return {alert.database}
    if alert.job is None:
        return set()
    found = {ledger_of.get(alert.job)}
    if alert.kind == "abandoned":
        found.add(database_of.get(alert.job))
    return {s for s in found if s}


def carry_alerts(
    previous: Iterable[Alert],
    new: Iterable[Alert],
    down: set[str],
    ledger_of: Mapping[str, str],
    database_of: Mapping[str, str],
) -> tuple[Alert, ...]:
    """The new alerts of sources that were read, and the previous ones of sources that were
    not (an unreadable source keeps its alerts: they are old, not over)."""
    every_ledger = set(ledger_of.values())

    def unread(alert: Alert) -> bool:
        sources = alert_sources(alert, ledger_of, database_of) or every_ledger
        return bool(sources & down)

    kept = [a for a in new if not unread(a)]
    seen = {a.key for a in kept}
    kept += [a for a in previous if unread(a) and a.key not in seen]
    return tuple(kept)


def freshness_of(
    now: datetime,
    last_good: Mapping[str, datetime],
    errors: Iterable[str],
    *,
    refresh: float,
    took: float,
    config: Config,
) -> Freshness:
    """The Freshness of what is on screen: a read stays fresh for the refresh interval and
    SLACK (or twice what the last refresh took, when that is longer)."""
    ledgers = {name: config.ledger_for(job).name for name, job in config.jobs.items()}
    return Freshness(
        now=now,
        last_good=dict(last_good),
        down=frozenset(errors),
        fresh_for=timedelta(seconds=refresh + max(SLACK, 2 * took)),
        ledger_of=ledgers,
        database_of={name: job.database for name, job in config.jobs.items()},
    )


def pane_sources(fresh: Freshness, databases: Iterable[str]) -> dict[str, set[str]]:
    """The databases each dashboard pane shows data of: holders come from every database,
    the history from the ledgers, the jobs pane from both."""
    ledgers = set(fresh.ledger_of.values())
    every = set(databases) | set(fresh.database_of.values())
    return {"jobs": every | ledgers, "holders": every, "history": ledgers}
