"""The [console] section: how often to refresh and what counts as stale, missed or recent; and
the [ledger] section: how long the run ledger keeps its rows."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from lockconsole.config.checks import parse_duration


@dataclass(frozen=True)
class ConsoleSettings:
    refresh: timedelta = timedelta(seconds=2)  # how often the console takes a snapshot
    idle_threshold: timedelta = timedelta(minutes=5)  # an idle holder this long is stale
    grace: timedelta = timedelta(minutes=5)  # a slot with no run this long after it is missed
    lookback: timedelta = timedelta(days=3)  # how far back slot reports and history look
    history_limit: int = 500  # runs read per ledger per snapshot
    statement_timeout: timedelta = timedelta(seconds=5)  # per query, so the console never hangs
    connect_timeout: timedelta = timedelta(seconds=5)  # per console connection attempt
    duplicates_every: timedelta = timedelta(minutes=1)  # how often idempotency tables are scanned
    timezone: str = "UTC"  # the one zone the console shows its times in (named once on screen)
    clock_skew: timedelta = timedelta(seconds=10)  # an instance's clock this far off is alerted


_DURATIONS = (
    "refresh",
    "idle_threshold",
    "grace",
    "lookback",
    "statement_timeout",
    "connect_timeout",
    "duplicates_every",
    "clock_skew",
)


def parse_console(
    raw: Mapping[str, object], error: Callable[[str, str], Exception]
) -> ConsoleSettings:
    """ConsoleSettings from the [console] table; `error(key, message)` builds the ConfigError."""
    values: dict[str, Any] = {}  # by field name: a timedelta or an int, each checked for its key
    for key, value in raw.items():
        if key in _DURATIONS:
            try:
                duration = parse_duration(value)
            except ValueError as exc:
                raise error(key, str(exc)) from None
            if duration <= timedelta(0):
                raise error(key, "must be longer than zero")
            values[key] = duration
        elif key == "timezone":
            from lockconsole.config.checks import zone_named

            if not isinstance(value, str):
                raise error(key, 'must be a time zone name, e.g. "UTC" or "Europe/Berlin"')
            try:
                zone_named(value)
            except ValueError as exc:
                raise error(key, str(exc)) from None
            values[key] = value
        elif key == "history_limit":
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 100_000:
                raise error(key, "must be a whole number from 1 to 100000")
            values[key] = value
        else:
            allowed = ", ".join((*_DURATIONS, "history_limit", "timezone"))
            raise error(key, f"unknown key (allowed: {allowed})")
    return ConsoleSettings(**values)


@dataclass(frozen=True)
class LedgerSettings:
    """[ledger]: how long the run ledger keeps its rows, and the holder journal."""

    retention: timedelta | None = None  # None: keep every row
    journal: bool = True  # the long-running samplers write the holder journal
    # how often `schedule` samples the holders of its jobs' databases for the journal (None: it
    # does not; the console and the metrics exporter sample at their own refresh)
    journal_every: timedelta | None = timedelta(seconds=10)


_LEDGER_KEYS = ("retention", "journal", "journal_every")


def parse_ledger(
    raw: Mapping[str, object], error: Callable[[str, str], Exception], lookback: timedelta
) -> LedgerSettings:
    """The [ledger] table; `error(key, message)` builds the ConfigError."""
    for key in raw:
        if key not in _LEDGER_KEYS:
            raise error(key, f"unknown key (allowed: {', '.join(_LEDGER_KEYS)})")
    values: dict[str, Any] = {}
    if "retention" in raw:
        try:
            values["retention"] = check_retention(raw["retention"], lookback)
        except ValueError as exc:
            raise error("retention", str(exc)) from None
    if "journal" in raw:
        if not isinstance(raw["journal"], bool):
            raise error("journal", "must be true or false")
        values["journal"] = raw["journal"]
    if "journal_every" in raw:
        value = raw["journal_every"]
        try:
            every = timedelta(0) if value in ("0", "off") else parse_duration(value)
        except ValueError as exc:
            raise error("journal_every", str(exc)) from None
        if timedelta(0) < every < timedelta(seconds=1):
            raise error("journal_every", "must be 1s or longer (0 turns schedule's sampling off)")
        values["journal_every"] = every or None
    return LedgerSettings(**values)


def check_retention(value: object, lookback: timedelta) -> timedelta:
    """A retention (or `prune --older-than`): a duration no shorter than [console] lookback,
    which would erase attempts of slots that `check` and the console still judge."""
    retention = parse_duration(value)
    if retention < lookback:
        raise ValueError(
            f"{value!r} is shorter than [console] lookback ({_days(lookback)}): it would prune "
            "slots that check and the console still judge"
        )
    return retention


def _days(span: timedelta) -> str:
    seconds = span.total_seconds()
    if seconds % 86400 == 0:
        return f"{int(seconds // 86400)}d"
    return f"{int(seconds // 3600)}h" if seconds % 3600 == 0 else f"{seconds:g}s"
