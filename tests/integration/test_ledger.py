"""The run ledger against real PostgreSQL, MariaDB/MySQL and SQLite.

The server tables are shared between tests (and with other test modules), so every test uses
its own job names and never drops the table there; the "created on first use" test drops it
only in a SQLite file of its own. All three dialects keep microseconds: timestamps must come
back exactly equal.
"""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta, timezone
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from lockconsole.backends.ledger.store import MAX_MESSAGE, TABLE, Ledger
from lockconsole.config.urls import parse_url
from lockconsole.model.errors import DatabaseError
from lockconsole.model.jobs import Database, Run

from tests.support.helpers import mysql_connect, wait_for
from tests.support.settings import ROOT


@pytest.fixture
def url(dialect_url: str) -> str:
    return dialect_url


@pytest.fixture
def ledger(url: str) -> Iterator[Ledger]:
    with Ledger(Database("main", parse_url(url))) as led:
        yield led


def make_run(job: str, slot: datetime, **changes: Any) -> Run:
    values: dict[str, Any] = {
        "job": job,
        "slot": slot,
        "instance": "web-1",
        "host": "host-a",
        "pid": 4242,
        "trigger": "scheduled",
        "outcome": "acquired",
        "started_at": slot + timedelta(seconds=1, microseconds=123456),
    }
    values.update(changes)
    return Run(**values)


SLOT = datetime(2026, 11, 29, 2, 0, tzinfo=UTC)


def test_table_created_on_first_use(tmp_path: Path) -> None:
    path = tmp_path / "fresh.db"
    url = f"sqlite:///{path}"
    with sqlite3.connect(path) as conn:  # an existing database without the ledger
        conn.execute(f"DROP TABLE IF EXISTS {TABLE}")
    with Ledger(Database("main", parse_url(url))) as ledger:
        run = ledger.record(make_run("first", SLOT))
        assert run.id == 1
    conn = sqlite3.connect(path)
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    conn.close()
    assert {TABLE, "ix_lockconsole_runs_job_slot", "ix_lockconsole_runs_started_at"} <= names


def test_reads_create_the_table_too(tmp_path: Path) -> None:
    with Ledger(Database("main", parse_url(f"sqlite:///{tmp_path / 'r.db'}"))) as ledger:
        assert ledger.runs() == []


def test_record_finish_round_trip(ledger: Ledger, uid: str) -> None:
    berlin = ZoneInfo("Europe/Berlin")
    slot = datetime(2026, 11, 29, 3, 0, tzinfo=berlin)  # 02:00 UTC
    started = datetime(2026, 11, 29, 3, 0, 1, 654321, tzinfo=berlin)
    run = make_run(
        f"rt_{uid}",
        slot,
        started_at=started,
        trigger="manual",
        fencing_token=9_000_000_000,
        session_id=123456789012,
        strategy="pg-session",
        lock_key="4242",
        message="starting",
        instance="web-7",
        host="host-z",
        pid=31337,
    )
    recorded = ledger.record(run)
    assert recorded.id is not None
    assert recorded == run.__class__(**{**run.__dict__, "id": recorded.id})

    finished_at = datetime(2026, 11, 29, 2, 5, 7, 1, tzinfo=timezone(timedelta(hours=-5)))
    done = ledger.finish(
        recorded, "failed", exit_code=3, message="boom\nsecond line", finished_at=finished_at
    )
    assert (done.outcome, done.exit_code, done.message) == ("failed", 3, "boom\nsecond line")

    (back,) = ledger.runs(f"rt_{uid}")
    assert back == done  # aware datetimes compare as instants
    for value, written in ((back.slot, slot), (back.started_at, started)):
        assert value.tzinfo is UTC and value == written
    assert back.slot == datetime(2026, 11, 29, 2, 0, tzinfo=UTC)
    assert back.started_at.microsecond == 654321  # microseconds kept on every dialect
    assert back.finished_at == finished_at and back.finished_at.tzinfo is UTC
    assert back.finished_at.microsecond == 1
    assert (back.trigger, back.fencing_token, back.session_id) == (
        "manual",
        9_000_000_000,
        123456789012,
    )
    assert (back.strategy, back.lock_key, back.instance, back.host, back.pid) == (
        "pg-session",
        "4242",
        "web-7",
        "host-z",
        31337,
    )


def test_finish_defaults_to_now(ledger: Ledger, uid: str) -> None:
    run = ledger.record(make_run(f"now_{uid}", SLOT))
    before = datetime.now(UTC)
    done = ledger.finish(run, "succeeded", exit_code=0)
    (back,) = ledger.runs(f"now_{uid}")
    assert back.finished_at == done.finished_at
    assert back.finished_at is not None and back.finished_at >= before - timedelta(seconds=1)


def test_long_messages_are_truncated(ledger: Ledger, uid: str) -> None:
    text = "start " + "x" * 50_000 + " the error at the end"
    run = ledger.record(make_run(f"long_{uid}", SLOT, message=text))
    assert run.message is not None and len(run.message) < MAX_MESSAGE + 100
    done = ledger.finish(run, "failed", message=text)
    (back,) = ledger.runs(f"long_{uid}")
    assert back.message == done.message
    assert back.message.startswith("start ") and back.message.endswith("the error at the end")
    assert back.message is not None and "truncated" in back.message


def test_bad_input_is_refused(ledger: Ledger, uid: str) -> None:
    with pytest.raises(ValueError, match="naive"):
        ledger.record(make_run(f"bad_{uid}", datetime(2026, 1, 1)))
    with pytest.raises(ValueError):
        ledger.record(make_run(f"bad_{uid}", SLOT, outcome="exploded"))
    with pytest.raises(ValueError):
        ledger.finish(make_run(f"bad_{uid}", SLOT), "succeeded")  # never recorded
    run = ledger.record(make_run(f"bad_{uid}", SLOT))
    with pytest.raises(ValueError):
        ledger.finish(run, "acquired")
    with pytest.raises(ValueError, match="naive"):
        ledger.slot_claim(f"bad_{uid}", datetime(2026, 1, 1))


def test_slot_claim(ledger: Ledger, uid: str) -> None:
    job = f"claim_{uid}"
    assert ledger.slot_claim(job, SLOT) is None
    skipped = ledger.record(make_run(job, SLOT, outcome="skipped"))
    assert ledger.slot_claim(job, SLOT) is None
    failed = ledger.finish(ledger.record(make_run(job, SLOT)), "failed", exit_code=1)
    lost = ledger.finish(ledger.record(make_run(job, SLOT)), "lock_lost")
    assert ledger.slot_claim(job, SLOT) is None, "skipped/failed/lock_lost do not claim"

    later = SLOT + timedelta(minutes=1)
    running = ledger.record(make_run(job, SLOT, started_at=later))
    assert ledger.slot_claim(job, SLOT) == running  # acquired = running claims the slot
    assert ledger.slot_claim(job, SLOT + timedelta(days=1)) is None  # another slot
    assert ledger.slot_claim(f"other_{uid}", SLOT) is None  # another job

    earlier_ok = ledger.finish(
        ledger.record(make_run(job, SLOT, started_at=SLOT)), "succeeded", exit_code=0
    )
    claim = ledger.slot_claim(job, SLOT)
    assert claim is not None and claim.id == earlier_ok.id and claim.outcome == "succeeded"
    assert {r.id for r in ledger.slot_runs(job, SLOT)} == {
        r.id for r in (skipped, failed, lost, running, earlier_ok)
    }


def test_slot_claim_same_instant_other_zone(ledger: Ledger, uid: str) -> None:
    job = f"tz_{uid}"
    run = ledger.record(make_run(job, SLOT))
    tokyo = SLOT.astimezone(ZoneInfo("Asia/Tokyo"))
    claim = ledger.slot_claim(job, tokyo)
    assert claim is not None and claim.id == run.id and claim.slot.tzinfo is UTC


def test_runs_and_slot_runs_order_and_filters(ledger: Ledger, uid: str) -> None:
    a, b = f"a_{uid}", f"b_{uid}"
    # far in the future: a shared ledger's other rows are all older, so ours come first
    base = datetime(2099, 3, 1, tzinfo=UTC) + timedelta(minutes=int(uid[:6], 16) % 100_000)
    made = []
    for day in range(5):
        slot = base + timedelta(days=day)
        made.append(ledger.record(make_run(a, slot, started_at=slot)))
    same_start = base + timedelta(days=5)
    tie1 = ledger.record(make_run(a, same_start, started_at=same_start, outcome="skipped"))
    tie2 = ledger.record(make_run(a, same_start, started_at=same_start))
    other = ledger.record(make_run(b, base, started_at=base))

    newest_first = ledger.runs(a)
    assert [r.id for r in newest_first] == [tie2.id, tie1.id] + [r.id for r in reversed(made)]
    assert [r.id for r in ledger.runs(a, limit=2)] == [tie2.id, tie1.id]
    since = ledger.runs(a, since=base + timedelta(days=3))
    assert [r.id for r in since] == [tie2.id, tie1.id, made[4].id, made[3].id]
    both = [r.id for r in ledger.runs(since=base - timedelta(seconds=1), limit=10_000)]
    assert other.id in both and tie2.id in both

    assert [r.id for r in ledger.slot_runs(a, same_start)] == [tie1.id, tie2.id]  # oldest first
    assert [r.id for r in ledger.slot_runs(b, base)] == [other.id]
    assert ledger.slot_runs(b, base + timedelta(days=1)) == []


def _kill(url: str, ledger: Ledger) -> None:
    """End the ledger's raw session from another connection, the way an operator (or a server
    restart) would."""
    u = parse_url(url)
    conn = ledger.connection
    if u.dialect == "postgresql":
        import psycopg

        pid = conn.execute("select pg_backend_pid()").fetchone()[0]
        with psycopg.connect(url, autocommit=True) as admin:
            assert admin.execute("select pg_terminate_backend(%s)", (pid,)).fetchone()[0]
            for _ in range(100):  # wait until the backend is gone
                if not admin.execute(
                    "select 1 from pg_stat_activity where pid = %s", (pid,)
                ).fetchone():
                    break
                time.sleep(0.05)
    else:
        with conn.cursor() as cur:
            cur.execute("SELECT CONNECTION_ID()")
            cid = cur.fetchone()[0]
        admin = mysql_connect(url)
        try:
            with admin.cursor() as cur:
                cur.execute("KILL %s", (cid,))

                def gone() -> bool:  # KILL returns before the thread has ended
                    cur.execute(
                        "select count(*) from information_schema.processlist where id = %s", (cid,)
                    )
                    return cur.fetchone()[0] == 0

                wait_for(gone, what="the killed connection to end")
        finally:
            admin.close()


@pytest.mark.parametrize("dialect", ["postgresql", "mysql"])
def test_reconnects_after_the_session_was_killed(
    dialect: str, request: pytest.FixtureRequest, uid: str
) -> None:
    url = request.getfixturevalue("pg_url" if dialect == "postgresql" else "mysql_url")
    job = f"kill_{uid}"
    with Ledger(Database("main", parse_url(url))) as ledger:
        run = ledger.record(make_run(job, SLOT))
        old = ledger.connection
        _kill(url, ledger)
        done = ledger.finish(run, "succeeded", exit_code=0)  # the write after the kill
        assert ledger.connection is not old
        _kill(url, ledger)
        assert ledger.slot_claim(job, SLOT) == done  # and a read on the raw connection
        _kill(url, ledger)
        second = ledger.record(make_run(job, SLOT, outcome="skipped"))
        assert [r.id for r in ledger.slot_runs(job, SLOT)] == [run.id, second.id]


def test_unreachable_database_is_one_line_without_password(tmp_path: Path) -> None:
    url = "postgresql://app:s3cretpw@127.0.0.1:1/nowhere"
    with Ledger(Database("main", parse_url(url))) as ledger, pytest.raises(DatabaseError) as info:
        ledger.record(make_run("x", SLOT))
    text = str(info.value)
    assert "s3cretpw" not in text and "\n" not in text and "***" in text


def test_driver_error_is_database_error(ledger: Ledger, uid: str) -> None:
    with pytest.raises(DatabaseError, match="run ledger") as info:
        ledger.record(make_run(f"e_{uid}", SLOT, host=None))  # NOT NULL on every dialect
    assert "\n" not in str(info.value)


HOT_PATH = textwrap.dedent(
    """
    import sys
    from datetime import UTC, datetime
    import lockconsole.backends.ledger.store
    from lockconsole.backends.ledger.store import Ledger
    from lockconsole.model.jobs import Database, Run
    from lockconsole.config.urls import parse_url

    now = datetime.now(UTC)
    with Ledger(Database("main", parse_url(sys.argv[1]))) as ledger:
        run = ledger.record(Run(job=sys.argv[2], slot=now, instance="i", host="h", pid=1,
                                trigger="scheduled", outcome="acquired", started_at=now))
        assert ledger.slot_claim(sys.argv[2], now).id == run.id
        ledger.finish(run, "succeeded", exit_code=0)
    assert "sqlalchemy" not in sys.modules, sorted(m for m in sys.modules if "sqlalchemy" in m)
    print("ok", run.id)
    """
)


def test_hot_path_does_not_import_sqlalchemy(ledger: Ledger, url: str, uid: str) -> None:
    ledger.create_schema()  # the table exists, as it does for every run but the first
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run(
        [sys.executable, "-c", HOT_PATH, url, f"hot_{uid}"],
        capture_output=True,
        text=True,
        env=env,
        timeout=60,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith("ok ")
    (back,) = ledger.runs(f"hot_{uid}")
    assert back.outcome == "succeeded" and back.exit_code == 0
