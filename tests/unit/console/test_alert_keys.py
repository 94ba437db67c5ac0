"""An alert has a key that stays the same while it lasts, whatever its message says: the
console logs it once and keeps one copy of it while its source cannot be read."""

from __future__ import annotations

from datetime import UTC, datetime

from lockconsole.console.snapshot.reports import alerts
from lockconsole.model.views import Holder, Snapshot
from lockconsole.tui.carry_over import news
from lockconsole.tui.freshness import carry_alerts

T0 = datetime(2026, 11, 29, 2, 0, tzinfo=UTC)


def stale(pid: int, idle: str) -> Holder:
    return Holder(
        database="main",
        kind="advisory",
        key="42",
        key_kind="int64",
        granted=True,
        source="pg_locks",
        job="billing",
        pid=pid,
        stale=f"idle in transaction for {idle}",
    )


def test_a_stale_holder_whose_idle_time_counts_up_is_one_alert() -> None:
    (first,) = alerts([], [stale(812, "5m")])
    (later,) = alerts([], [stale(812, "6m")])
    (other,) = alerts([], [stale(813, "6m")])
    assert first.message != later.message and first.key == later.key
    assert other.key != later.key  # another session: another alert


def test_news_logs_an_alert_once_while_its_message_changes() -> None:
    seen: set[tuple[object, ...]] = set()
    lines = []
    for idle, pids in (("5m", [812]), ("6m", [812]), ("7m", [812, 813])):
        snap = Snapshot(T0, alerts=tuple(alerts([], [stale(p, idle) for p in pids])))
        lines += news(snap, seen)
    assert len(lines) == 2, lines
    assert "pid 812" in lines[0] and "5m" in lines[0] and "pid 813" in lines[1]


def test_an_unread_source_keeps_one_copy_of_each_alert() -> None:
    before = tuple(alerts([], [stale(812, "5m"), stale(813, "5m")]))
    now = alerts([], [stale(812, "6m")])  # main is down: its alerts are old, not over
    kept = carry_alerts(before, now, {"main"}, {"billing": "main"}, {"billing": "main"})
    assert sorted(a.message for a in kept) == sorted(a.message for a in before)
    read = carry_alerts(before, now, set(), {"billing": "main"}, {"billing": "main"})
    assert [a.message for a in read] == [now[0].message]  # read: what it says now, once
    assert len({a.key for a in kept}) == len(kept)
