"""The plain-cron matcher gives exactly croniter's firings, and refuses what it does not cover."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest
from croniter import croniter

from lockconsole.model import cron

_RANGES = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 7))
_NAMES = {3: cron._MONTHS, 4: cron._DAYS}


def _term(rng: random.Random, index: int) -> str:
    low, high = _RANGES[index]
    names = _NAMES.get(index)

    def value() -> str:
        n = rng.randint(low, high)
        if names and rng.random() < 0.3:
            name = names[(n - 1) % 12 if index == 3 else n % 7]
            return name.upper() if rng.random() < 0.3 else name
        return str(n)

    kind = rng.choice(("*", "n", "range", "step", "range-step", "n"))
    if kind == "*":
        return "*"
    if kind == "step":
        return f"*/{rng.randint(1, max(1, high // 2))}"
    if kind in ("range", "range-step"):
        a, b = sorted(rng.sample(range(low, high + 1), 2))
        text = f"{a}-{b}"
        return text if kind == "range" else f"{text}/{rng.randint(1, max(1, b - a))}"
    return value()


def _field(rng: random.Random, index: int) -> str:
    return ",".join(_term(rng, index) for _ in range(rng.choice((1, 1, 1, 2, 3))))


def _expression(rng: random.Random) -> str:
    fields = [_field(rng, i) for i in range(5)]
    if rng.random() < 0.5:
        fields[2 if rng.random() < 0.5 else 4] = "*"
    return " ".join(fields)


def _moment(rng: random.Random) -> datetime:
    start = datetime(2023, 1, 1, tzinfo=UTC)
    seconds, micros = rng.randrange(4 * 366 * 86400), rng.randrange(10**6)
    return start + timedelta(seconds=seconds, microseconds=micros)


def test_random_expressions_fire_exactly_when_croniter_does() -> None:
    rng = random.Random(18)
    compared = refused = 0
    for _ in range(1500):
        expr = _expression(rng)
        parsed = cron.parse(expr)
        if parsed is None:
            refused += 1
            continue
        assert croniter.is_valid(expr), expr  # accepted here means valid there
        for _ in range(3):
            at = _moment(rng)
            want_prev = croniter(expr, at + timedelta(seconds=1)).get_prev(datetime)
            assert parsed.prev(at + timedelta(seconds=1) - timedelta(microseconds=1)) == want_prev
            assert parsed.next(at) == croniter(expr, at).get_next(datetime), (expr, at)
            compared += 1
    assert compared > 2000
    assert refused > 50  # both day fields restricted: croniter's rule, not ours


@pytest.mark.parametrize(
    "expr",
    [
        "*/5 * * * *",
        "0 2 * * *",
        "0 0 29 2 *",
        "0 0 31 * *",
        "15 10 * * mon-fri",
        "0 0 * jan,jul sun",
        "59 23 * * 7",
        "0 */6 1-15/3 * *",
    ],
)
def test_edge_schedules_around_month_and_leap_years(expr: str) -> None:
    parsed = cron.parse(expr)
    assert parsed is not None
    at = datetime(2023, 12, 31, 23, 59, 30, tzinfo=UTC)
    for _ in range(40):
        want = croniter(expr, at).get_next(datetime)
        assert parsed.next(at) == want
        assert parsed.prev(want + timedelta(seconds=59)) == want
        at = want


@pytest.mark.parametrize(
    "expr, timezone",
    [
        ("0 2 * * *", "Europe/Paris"),
        ("*/5 * * * * 30", "UTC"),
        ("@daily", "UTC"),
        ("0 0 L * *", "UTC"),
        ("0 0 * * 5#3", "UTC"),
        ("0 0 1 * mon", "UTC"),
        ("0 22-2 * * *", "UTC"),
        ("5/15 * * * *", "UTC"),
        ("60 * * * *", "UTC"),
        ("0 0 ? * *", "UTC"),
        ("0 0 * * *", "Asia/Kolkata"),
    ],
)
def test_what_it_does_not_cover_goes_to_croniter(expr: str, timezone: str) -> None:
    assert cron.parse(expr, timezone) is None
