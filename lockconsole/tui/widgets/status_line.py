"""The dashboard's status line and its error banner, from one `Freshness` (pure Rich text).

    status_text(databases, fresh, ...)   each database ● ok / ◌ 12s old / ✖ down, how old the
                                         oldest data on screen is, the refresh, the badges
    banner_text(errors, fresh, zone)     what went wrong, and how old the data still shown is

Both read the age of the data from the same `Freshness.oldest()`, so they always agree.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import tzinfo

from rich.text import Text

from lockconsole.text.safe import fit, shown
from lockconsole.text.times import age, seconds, stamp
from lockconsole.tui.freshness import REFRESH, Freshness
from lockconsole.tui.nocolor import ALARM

BANNER_WIDTH = 400  # terminal cells of one database error in the banner


def data_age(fresh: Freshness) -> str:
    """How old the oldest data on screen is ('-' before any)."""
    return age(fresh.oldest(), fresh.now)


def status_text(
    databases: Iterable[str],
    fresh: Freshness,
    *,
    loaded: bool,
    refresh: float,
    paused: bool,
    read_only: bool,
    busy: float | None,
    alerts: int,
    old_alerts: int = 0,
    zone: str = "UTC",
) -> Text:
    """The one status line: each database's state, data age, refresh, the zone, badges."""
    text = Text()
    for name in databases:
        label = shown(name)
        if not loaded:
            text.append(f"{label} … ", style="dim")
        elif name in fresh.down:
            text.append(f"{label} ✖ down ", style=ALARM)
        elif fresh.is_old(name):  # late, or the refresh failed: no "ok" beside old data
            good = fresh.good_since(name)
            text.append(f"{label} ◌ {age(good, fresh.now)} old ", style="bold yellow")
        else:
            text.append(f"{label} ● ok ", style="green")
    text.append("│ ")
    shown_age = data_age(fresh)
    if not loaded:
        text.append("loading…")
        if paused:
            text.append(" │ PAUSED", style="bold yellow")
    elif paused:
        text.append(f"PAUSED: data {shown_age} old, not refreshing", style="bold yellow")
    else:
        text.append(f"data {shown_age} old │ every {seconds(refresh)}")
    text.append(f" │ times {zone}")
    if busy is not None and busy >= 1:
        text.append(f" │ refreshing {seconds(int(busy))}…", style="yellow")
    if alerts:
        old = f", {old_alerts} old" if old_alerts else ""
        text.append(f" │ {alerts} alerts{old} (o)", style=ALARM)
    if read_only:
        text.append(" ")
        text.append(" READ-ONLY ", style="bold reverse")
    return text


def banner_text(errors: Mapping[str, str], fresh: Freshness, zone: tzinfo | None = None) -> Text:
    """What went wrong, and how old the data still shown is (the status line's age)."""
    text = Text()
    for name, error in errors.items():
        text.append(f"⚠ {shown(name)}: ", style="bold")
        text.append(fit(shown(error), BANNER_WIDTH) + "\n")
    down = [n for n in errors if n != REFRESH] or list(fresh.last_good)
    never = [shown(n) for n in down if fresh.good_since(n) is None]
    last_good = fresh.oldest(down)
    if last_good is not None:
        text.append(
            f"showing the last good data, from {stamp(last_good, tz=zone)} "
            f"({age(last_good, fresh.now)} old); "
        )
    if last_good is None:
        text.append("no data yet; ")
    elif never:
        text.append(f"no data yet from {', '.join(never)}; ")
    text.append("retrying on every refresh")
    return text
