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
        (42, "42s"),
        (119, "119s"),
        (120, "2m"),
        (840, "14m"),
        (7380, "2h03m"),
        (183600, "2d03h"),
        (-5, "0s"),
    ],
)
def test_span_and_age(seconds: int, text: str) -> None:
    assert times.span(timedelta(seconds=seconds)) == text
    assert times.age(NOW - timedelta(seconds=seconds), NOW) == text


def test_age_unknown() -> None:
    assert times.age(None, NOW) == "-"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [(0.012, "12ms"), (4.25, "4.2s"), (59.94, "59.9s"), (612, "10m12s"), (7500, "2h05m")],
)
def test_took(seconds: float, text: str) -> None:
    assert times.took(timedelta(seconds=seconds)) == text
    assert times.took(None) == "—"


def test_duration() -> None:
    assert times.duration(NOW, None) == "running"
    assert times.duration(NOW, NOW + timedelta(milliseconds=250)) == "250ms"
    assert times.duration(NOW, NOW + timedelta(seconds=4.2)) == "4.2s"
    assert times.duration(NOW, NOW + timedelta(minutes=14)) == "14m"


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.0, "0s"),
        (1.5, "1.5s"),
        (1.0, "1s"),
        (45, "45s"),
        (90, "1m30s"),
        (840, "14m"),
        (7980, "2h13m"),
        (7200, "2h"),
        (90000, "1d1h"),
        (86400, "1d"),
    ],
)
def test_reading(seconds: float, text: str) -> None:
    assert times.reading(timedelta(seconds=seconds)) == text


def test_stamp_is_utc() -> None:
    berlin = NOW.astimezone(timezone(timedelta(hours=1)))
    assert times.stamp(berlin) == "2026-11-27 12:00:00 UTC"
    assert (
        times.stamp(NOW + timedelta(microseconds=123456), ms=True) == "2026-11-27 12:00:00.123 UTC"
    )
    assert times.stamp(NOW, seconds=False) == "2026-11-27 12:00 UTC"
    assert times.stamp(NOW, zone=False) == "2026-11-27 12:00:00"
    assert times.stamp(None) == "—"


def test_when_and_seconds() -> None:
    assert times.when(NOW.replace(hour=2, minute=15), NOW) == "02:15"
    assert times.when(NOW.replace(hour=2, second=5), NOW) == "02:00:05"
    assert times.when(NOW - timedelta(days=1), NOW) == "11-26 12:00"
    assert times.when(None, NOW) == "-"
    assert times.seconds(0.5) == "0.5s" and times.seconds(300) == "5m"
