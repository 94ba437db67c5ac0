"""Where ages, durations and times become text (text/times.py), for the CLI and the console."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from lockconsole.text import times

NOW = datetime(2026, 11, 27, 12, 0, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "0s"),
        (0.012, "12ms"),
        (0.9994, "999ms"),
        (1, "1s"),
        (4.25, "4.2s"),
        (9.94, "9.9s"),
        (42, "42s"),
        (59.9, "59s"),
        (63, "1m03s"),
        (119, "1m59s"),
        (840, "14m00s"),
        (3599, "59m59s"),
        (7380, "2h03m"),
        (172799, "47h59m"),
        (183600, "2d03h"),
        (-5, "0s"),
    ],
)
def test_one_duration_format_everywhere(seconds: float, text: str) -> None:
    """span, age, took, duration, reading and seconds all write the same text for a length."""
    delta = timedelta(seconds=seconds)
    assert times.span(delta) == text
    assert times.took(delta) == text
    assert times.reading(delta) == text
    assert times.age(NOW - delta, NOW) == text
    assert times.duration(NOW, NOW + delta) == text
    if seconds >= 0:
        assert times.seconds(seconds) == text
    assert len(text) <= 6  # a fixed-width column holds any of them


def test_unknown_and_running() -> None:
    assert times.age(None, NOW) == "-"
    assert times.took(None) == "—"
    assert times.duration(NOW, None) == "running"


def test_stamp_is_utc_by_default_and_keeps_seconds() -> None:
    berlin = NOW.astimezone(timezone(timedelta(hours=1)))
    assert times.stamp(berlin) == "2026-11-27 12:00:00 UTC"
    assert (
        times.stamp(NOW + timedelta(microseconds=123456), ms=True) == "2026-11-27 12:00:00.123 UTC"
    )
    assert times.stamp(NOW, zone=False) == "2026-11-27 12:00:00"
    assert times.stamp(None) == "—"


def test_clock_keeps_seconds_so_sub_minute_slots_differ() -> None:
    slots = [NOW.replace(hour=3, minute=7, second=s) for s in (0, 20, 40)]
    assert [times.clock(s, NOW) for s in slots] == ["03:07:00", "03:07:20", "03:07:40"]
    assert times.when(NOW - timedelta(days=1), NOW) == "11-26 12:00:00"
    assert times.clock(None, NOW) == "-"


def test_a_console_zone_is_applied_and_named() -> None:
    from zoneinfo import ZoneInfo

    from lockconsole.config.checks import zone_named

    berlin = zone_named("Europe/Berlin")
    assert isinstance(berlin, ZoneInfo)
    assert times.clock(NOW, NOW, berlin) == "13:00:00"
    assert times.stamp(NOW, tz=berlin) == "2026-11-27 13:00:00 Europe/Berlin"
    assert times.zone_label(None) == times.zone_label(zone_named("utc")) == "UTC"
    with pytest.raises(ValueError, match="unknown time zone"):
        zone_named("Mars/Olympus")
