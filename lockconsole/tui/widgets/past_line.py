"""The banner and the status line of the dashboard while its clock is set back (pure Rich text).

    past_banner(past, now, zone)   THE PAST, the moment, what is shown, how to get back
    past_status(past, zone)        the status line's text meanwhile: not refreshing, and why

Both are in reverse video (and say PAST in words), so the past never reads as live data, with
colour or without (NO_COLOR).
"""

from __future__ import annotations

from datetime import datetime, tzinfo

from rich.text import Text

from lockconsole.text.safe import fit, shown
from lockconsole.text.times import age, stamp
from lockconsole.tui.past import Past

PAST_STYLE = "bold reverse yellow"
ERROR_WIDTH = 300  # terminal cells of one part's error in the banner


def past_banner(past: Past, now: datetime, zone: tzinfo | None, back_key: str = "N") -> Text:
    """What the dashboard shows, and since when: the moment, how long ago, the way back."""
    text = Text()
    text.append(f" ◀ THE PAST: {stamp(past.moment, ms=True, tz=zone)} ", style=PAST_STYLE)
    text.append(f" {age(past.moment, now)} ago · ")
    text.append("holders as the holder journal saw them, the history as of then")
    if past.came_from:
        text.append(" · from " + shown(past.came_from), style="dim")
    text.append(f" · {back_key}: back to now", style="bold")
    for part, why in past.errors:
        text.append("\n⚠ ", style="bold")
        text.append(shown(part) + ": unknown: " + fit(shown(why), ERROR_WIDTH))
    return text


def past_status(past: Past, zone: tzinfo | None) -> Text:
    """The status line in the past: no database state, no data age; the moment and no refresh."""
    text = Text(f" PAST {stamp(past.moment, tz=zone)} ", style=PAST_STYLE)
    text.append(" │ not refreshing: live data would overwrite the past │ ")
    holders = len(past.snapshot.holders)
    runs = len(past.snapshot.runs)
    text.append(
        f"{holders} holder{'' if holders == 1 else 's'} journaled then, "
        f"{runs} run{'' if runs == 1 else 's'} started by then"
    )
    return text
