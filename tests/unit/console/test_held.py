"""console/snapshot/held.py: how long a lock is held where the database does not say (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from lockconsole.console.snapshot.held import Sightings, is_idle
from lockconsole.model.views import Holder

T0 = datetime(2026, 11, 29, 2, 0, tzinfo=UTC)
SECOND = timedelta(seconds=1)


def lock(**changes: Any) -> Holder:
    values: dict[str, Any] = dict(
        database="main",
        kind="advisory",
        key="42",
        key_kind="int64",
        granted=True,
        source="pg_locks",
        pid=812,
        backend_start=T0 - timedelta(hours=1),
        state="active",
        state_since=T0,
    )
    values.update(changes)
    return Holder(**values)


def test_the_first_sighting_stays_and_a_keep_alive_never_moves_it() -> None:
    seen = Sightings()
    [first] = seen.stamp([lock()], T0)
    assert (first.first_seen, first.held_since, first.held_from) == (T0, T0, "at_least")
    # a keep-alive ran a second ago: idle since then; the lock is as old as before
    [later] = seen.stamp([lock(state="idle", state_since=T0 + 9 * SECOND)], T0 + 10 * SECOND)
    assert (later.first_seen, later.held_since) == (T0, T0)


def test_an_idle_session_bounds_it_earlier_and_the_bound_stays() -> None:
    seen = Sightings()
    [idle] = seen.stamp([lock(state="idle", state_since=T0 - timedelta(minutes=3))], T0)
    assert idle.held_since == T0 - timedelta(minutes=3) and idle.first_seen == T0
    [active] = seen.stamp([lock(state="active", state_since=T0 + SECOND)], T0 + 2 * SECOND)
    assert active.held_since == T0 - timedelta(minutes=3)  # learnt once, kept


def test_a_reused_pid_is_a_new_holder_and_a_gone_one_is_forgotten() -> None:
    seen = Sightings()
    seen.stamp([lock()], T0)
    [reused] = seen.stamp([lock(backend_start=T0 + SECOND)], T0 + 5 * SECOND)
    assert reused.first_seen == T0 + 5 * SECOND
    seen.stamp([], T0 + 6 * SECOND)  # released
    [again] = seen.stamp([lock(backend_start=T0 + SECOND)], T0 + 7 * SECOND)
    assert again.first_seen == T0 + 7 * SECOND


def test_one_gone_among_many_is_forgotten_even_when_another_is_listed_twice() -> None:
    """Entries are updated in place and the table is rebuilt when fewer holders were seen
    than it holds: a holder listed twice in one read (two modes of one key) counts once."""
    seen = Sightings()
    seen.stamp([lock(key="1"), lock(key="2"), lock(key="3")], T0)
    twice = [lock(key="1"), lock(key="1", mode="ShareLock"), lock(key="3")]
    [one, also, three] = seen.stamp(twice, T0 + SECOND)  # key 2 was released
    assert one.first_seen == also.first_seen == three.first_seen == T0
    [two] = seen.stamp([lock(key="2")], T0 + 2 * SECOND)
    assert two.first_seen == T0 + 2 * SECOND, "a released lock taken again is new"
    [kept] = seen.stamp([lock(key="2")], T0 + 3 * SECOND)
    assert kept.first_seen == T0 + 2 * SECOND


def test_an_unreadable_database_keeps_its_sightings() -> None:
    seen = Sightings()
    seen.stamp([lock(), lock(database="other")], T0)
    seen.stamp([lock()], T0 + SECOND, unread={"other"})  # "other" could not be read
    [back] = seen.stamp([lock(database="other")], T0 + 2 * SECOND, unread=())
    assert back.first_seen == T0


def test_what_the_database_says_is_kept_and_named() -> None:
    seen = Sightings()
    [lease] = seen.stamp([lock(kind="lease", pid=None, held_since=T0 - SECOND)], T0)
    assert (lease.held_since, lease.held_from) == (T0 - SECOND, "database")
    xact = lock(held_since=T0 - SECOND, xact_start=T0 - SECOND, state="idle in transaction")
    [pg_xact] = seen.stamp([xact], T0)
    assert pg_xact.held_from == "transaction"
    [waiter] = seen.stamp([lock(granted=False)], T0)
    assert waiter.held_from is None and waiter.first_seen is None


def test_idle_is_postgresql_idle_states_and_mysql_sleep() -> None:
    assert is_idle("idle") and is_idle("idle in transaction") and is_idle("Sleep")
    assert not is_idle("active") and not is_idle("Query (executing)") and not is_idle(None)
