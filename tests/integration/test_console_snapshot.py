"""Console.snapshot() keeps its connections: the ledger read reuses one session between
snapshots and reconnects after that session is killed; mark_stale copies only what changes."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from typing import Any

from lockconsole.config.loader import parse_config
from lockconsole.console import facade as console_module
from lockconsole.console.facade import Console
from lockconsole.console.snapshot.stale import mark_stale
from lockconsole.model.views import Holder

from tests.support.helpers import DEADLINE


def _pids(pg_conn, app: str) -> list[int]:
    rows = pg_conn.execute(
        "select pid from pg_stat_activity where application_name = %s order by pid", (app,)
    ).fetchall()
    return [r[0] for r in rows]


def _wait_gone(pg_conn, app: str, pid: int) -> None:
    deadline = time.monotonic() + DEADLINE
    while pid in _pids(pg_conn, app) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert pid not in _pids(pg_conn, app)


def test_snapshot_reuses_its_ledger_connection_and_reconnects(pg_url, pg_conn, uid, monkeypatch):
    app = f"lc-ledger-{uid}"
    monkeypatch.setattr(console_module, "LEDGER_APPLICATION_NAME", app)
    config = parse_config(
        f'[databases.main]\nurl = "{pg_url}"\n'
        f'[jobs.j_{uid}]\nstrategy = "pg-session"\nschedule = "0 2 * * *"\n',
        "<test>",
    )
    with Console(config, read_only=True) as console:
        assert console.snapshot().errors == ()
        (pid,) = _pids(pg_conn, app)
        assert console.snapshot().errors == ()
        assert _pids(pg_conn, app) == [pid]  # the same session, not a new one per snapshot

        pg_conn.execute("select pg_terminate_backend(%s)", (pid,))
        _wait_gone(pg_conn, app, pid)
        assert console.snapshot().errors == ()  # reconnected, no error shown
        (again,) = _pids(pg_conn, app)
        assert again != pid
        assert console.snapshot().errors == ()
        assert _pids(pg_conn, app) == [again]
    _wait_gone(pg_conn, app, again)  # close() closes it


def _holder(**kw: Any) -> Holder:
    base: dict[str, object] = {
        "database": "main",
        "kind": "advisory",
        "key": "1",
        "key_kind": "int64",
        "granted": True,
        "source": "pg_locks",
        "pid": 10,
        "state": "idle",
    }
    return Holder(**{**base, **kw})


def test_mark_stale_copies_only_holders_it_changes() -> None:
    now = datetime(2026, 11, 29, 12, 0, tzinfo=UTC)
    fresh = [_holder(key=str(k), state_since=now - timedelta(seconds=5)) for k in range(3)]
    idle = [_holder(key=str(k), pid=11, state_since=now - timedelta(hours=2)) for k in range(3)]
    waiter = _holder(key="9", pid=12, granted=False, state="active")
    out = mark_stale([*fresh, *idle, waiter], [], [], now=now, idle_threshold=timedelta(minutes=10))
    assert all(a is b for a, b in zip(out[:3], fresh, strict=True))  # unchanged: not copied
    assert out[6] is waiter
    for before, after in zip(idle, out[3:6], strict=True):
        assert after.stale == "idle for 2h00m"
        assert after == Holder(**{**vars(before), "stale": "idle for 2h00m"})
    again = mark_stale(out, [], [], now=now, idle_threshold=timedelta(minutes=10))
    assert all(a is b for a, b in zip(again, out, strict=True))
