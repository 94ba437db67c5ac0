"""The redis strategy on a real redis-server: ShedLock's key format, holders, guarded release."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
import redis

from lockconsole.backends.audit import Actor, AuditLog
from lockconsole.backends.ledger.store import Ledger
from lockconsole.backends.redis.inspect import RedisInspector, parse_shedlock_value
from lockconsole.backends.redis.lock import RedisLock, shedlock_value
from lockconsole.config.loader import load_config
from lockconsole.config.urls import parse_url
from lockconsole.console.facade import Console, ReadOnlyError
from lockconsole.engine import faultpoints
from lockconsole.model.jobs import Database, Job, LockKey

from tests.support.barrier import Barrier
from tests.support.redis_fixture import (
    RedisServer,
    redis_job_config,
)
from tests.support.runner_helpers import lockconsole, runs_of
from tests.support.settings import PYTHON

JAVA_VALUE = "ADDED:2026-11-30T21:15:03.123Z@java-host-1:3f2b1c9e-1234-4abc-9def-0123456789ab"
ACTOR = Actor("tester", "testhost")


@pytest.fixture
def client(redis_url: str) -> Iterator[redis.Redis]:
    c = redis.Redis.from_url(redis_url)
    yield c
    c.close()


def _job(uid: str, **extra: Any) -> Job:
    return Job(
        f"job_{uid}",
        "cache",
        "redis",
        LockKey("name", f"billing_{uid}"),
        max_duration=timedelta(minutes=10),
        **extra,
    )


def test_value_format_is_shedlocks_and_parses_back() -> None:
    value = shedlock_value("web-1")
    host, added = parse_shedlock_value(value)
    assert value.startswith("ADDED:") and value.count("@") == 1
    assert host == "web-1" and added is not None and added.tzinfo is not None
    assert parse_shedlock_value(JAVA_VALUE)[0] == "java-host-1"
    assert parse_shedlock_value("ADDED:2026-11-30T21:15:03Z@old-host")[0] == "old-host"
    assert parse_shedlock_value("Rq8xYzT0aB3cD4eF") == (None, None)  # Laravel's owner


def test_acquire_excludes_fences_and_releases(
    redis_url: str, client: redis.Redis, uid: str
) -> None:
    db = Database("cache", parse_url(redis_url))
    job = _job(uid)
    key = f"job-lock:default:billing_{uid}"
    ledger = Ledger(Database("ledger", parse_url(f"sqlite:///{_tmp_db(uid)}")))
    with RedisLock(job, db, owner="a") as first, RedisLock(job, db, owner="b") as second:
        assert first.acquire() and not second.acquire()
        assert client.get(key) == first.value.encode()
        assert 0 < client.pttl(key) <= 600_000
        assert first.still_held()
        token = first.issue_token(ledger)
        first.release()
        assert client.get(key) is None and first.reusable()
        assert second.acquire() and second.issue_token(ledger) == token + 1
        client.set(key, JAVA_VALUE)  # taken over (say, after it expired)
        assert not second.still_held()
        second.release()  # compare-and-delete: not ours, nothing deleted
        assert client.get(key) == JAVA_VALUE.encode() and not second.reusable()
    ledger.close()
    client.delete(key)


def test_redis_cli_shedlock_key_blocks_run_and_shows_host(
    pg_url: str, redis_url: str, client: redis.Redis, uid: str, write_config, cli_env, tmp_path
) -> None:
    job = f"billing_{uid}"
    config = write_config(redis_job_config(pg_url, redis_url, job))
    key = f"job-lock:default:{job}"
    # the Java app's acquisition, as ShedLock's Redis provider sends it
    cli = subprocess.run(
        ["redis-cli", "-u", redis_url, "SET", key, JAVA_VALUE, "NX", "PX", "600000"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert cli.stdout.strip() == "OK", cli
    marks = tmp_path / "marks"
    proc = lockconsole(
        config,
        "run",
        job,
        "--json",
        "--",
        PYTHON,
        "-c",
        f"open({str(marks)!r}, 'a').write('ran')",
        env=cli_env,
    )
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 3, err
    assert json.loads(out)["outcome"] == "skipped" and not marks.exists()
    proc = lockconsole(config, "locks", "--json", env=cli_env)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    found = [h for h in json.loads(out)["holders"] if h["key"] == key]
    assert len(found) == 1, out
    assert found[0]["job"] == job and found[0]["locked_by"] == "java-host-1"
    assert found[0]["value"] == JAVA_VALUE and found[0]["held_since"].startswith("2026-11-30T21:15")
    assert client.get(key) == JAVA_VALUE.encode()  # lockconsole never touched it
    client.delete(key)


def test_lock_at_least_for_keeps_the_key_after_a_quick_job(
    pg_url: str, redis_url: str, client: redis.Redis, uid: str, write_config, cli_env
) -> None:
    job = f"quick_{uid}"
    config = write_config(redis_job_config(pg_url, redis_url, job, min_hold="5m"))
    key = f"job-lock:default:{job}"
    proc = lockconsole(config, "run", job, "--json", "--", PYTHON, "-c", "pass", env=cli_env)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 0, err
    run = json.loads(out)
    assert run["outcome"] == "succeeded" and run["fencing_token"] >= 1
    value = client.get(key)
    assert isinstance(value, bytes) and value.startswith(b"ADDED:")
    assert 0 < client.pttl(key) <= 300_000  # now expires at the end of min_hold
    again = lockconsole(config, "run", job, "--", PYTHON, "-c", "pass", env=cli_env)
    again.communicate(timeout=60)
    assert again.returncode == 3  # still held: lockAtLeastFor
    client.delete(key)


def test_without_min_hold_the_key_is_deleted(
    pg_url: str, redis_url: str, client: redis.Redis, uid: str, write_config, cli_env
) -> None:
    job = f"plain_{uid}"
    config = write_config(redis_job_config(pg_url, redis_url, job))
    proc = lockconsole(config, "run", job, "--", PYTHON, "-c", "pass", env=cli_env)
    proc.communicate(timeout=60)
    assert proc.returncode == 0
    assert client.get(f"job-lock:default:{job}") is None


def test_redis_restart_mid_run_is_lock_lost_and_stops_the_job(
    pg_url: str, private_redis: RedisServer, uid: str, write_config, cli_env, tmp_path: Path
) -> None:
    job = f"long_{uid}"
    config = write_config(
        redis_job_config(pg_url, private_redis.url, job, watchdog_interval=0.2, stop_grace=5)
    )
    marks = tmp_path / "marks"
    body = (
        f"import time; open({str(marks)!r}, 'a').write('started\\n'); time.sleep(300); "
        f"open({str(marks)!r}, 'a').write('finished\\n')"
    )
    barrier = Barrier(tmp_path / "barrier", faultpoints.JOB_STARTED)
    proc = lockconsole(
        config, "run", job, "--json", "--", PYTHON, "-c", body, env=barrier.env(cli_env)
    )
    barrier.wait(faultpoints.JOB_STARTED)
    private_redis.restart()  # no persistence: the key is gone
    barrier.release(faultpoints.JOB_STARTED)
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 4, err
    assert json.loads(out)["outcome"] == "lock_lost"
    assert "finished" not in (marks.read_text() if marks.exists() else "")
    [run] = runs_of(config, job)
    assert run.outcome == "lock_lost" and run.finished_at is not None


def test_guarded_release_refuses_a_changed_value_and_is_audited(
    pg_url: str, redis_url: str, client: redis.Redis, uid: str, write_config
) -> None:
    job = f"guard_{uid}"
    config = load_config(str(write_config(redis_job_config(pg_url, redis_url, job))))
    key = f"job-lock:default:{job}"
    client.set(key, JAVA_VALUE, px=600_000)
    with Console(config, read_only=True, actor=ACTOR) as ro:
        [seen] = [h for h in ro.snapshot(duplicates=False).holders if h.key == key]
        with pytest.raises(ReadOnlyError):
            ro.release(seen)
    assert client.get(key) == JAVA_VALUE.encode()
    with Console(config, actor=ACTOR) as console:
        [seen] = [h for h in console.snapshot(duplicates=False).holders if h.key == key]
        assert seen.job == job and seen.value == JAVA_VALUE
        newer = JAVA_VALUE.replace("java-host-1", "java-host-2")
        client.set(key, newer, px=600_000)  # the holder changed after the listing
        result = console.release(seen)
        assert result.status == "holder_changed", result
        assert client.get(key) == newer.encode()
        [fresh] = [h for h in console.snapshot(duplicates=False).holders if h.key == key]
        assert fresh.locked_by == "java-host-2"
        assert console.release(fresh).status == "released"
    assert client.get(key) is None
    audit = AuditLog(config.databases["ledger"])
    try:
        mine = [e for e in audit.entries(50) if key in e.target]
    finally:
        audit.close()
    assert [e.result for e in mine] == ["released", "holder_changed"]


def test_hostile_key_names_and_values_are_kept_literally(
    redis_url: str, client: redis.Redis, uid: str
) -> None:
    db = Database("cache", parse_url(redis_url), scan_prefixes=(f"hostile_{uid}:",))
    names = {
        f"hostile_{uid}:[bold red]boom[/]".encode(): b"[link=file:///etc]x\x1b[2J\x07",
        f"hostile_{uid}:\x1b]0;title\x07\r\n".encode(): b"\xff\xfe not utf-8",
        f"hostile_{uid}:\xff".encode("latin-1"): JAVA_VALUE.encode(),
    }
    for key, value in names.items():
        client.set(key, value, px=600_000)
    inspector = RedisInspector(db)
    try:
        listed = inspector.holders([]).holders
        seen = {h.key.encode("utf-8", "surrogateescape"): h for h in listed}
        assert set(seen) == set(names)
        for key, value in names.items():
            assert seen[key].value.encode("utf-8", "surrogateescape") == value
            assert seen[key].job is None  # unmapped
        audit = AuditLog(Database("audit", parse_url(f"sqlite:///{_tmp_db(uid)}")))
        try:
            for key in names:  # the exact bytes survive the round trip to a release
                assert inspector.release(seen[key], actor=ACTOR, audit=audit).status == "released"
        finally:
            audit.close()
    finally:
        inspector.close()
    assert not any(client.exists(k) for k in names)


def _tmp_db(uid: str) -> str:
    import tempfile

    return str(Path(tempfile.gettempdir()) / f"lockconsole-audit-{uid}.db")


def test_stale_when_the_ttl_is_far_past_max_duration(
    pg_url: str, redis_url: str, client: redis.Redis, uid: str, write_config
) -> None:
    job = f"ttl_{uid}"
    config = load_config(
        str(write_config(redis_job_config(pg_url, redis_url, job, max_duration="1m")))
    )
    key = f"job-lock:default:{job}"
    client.set(
        key, JAVA_VALUE.replace("2026-11-30T21:15:03.123Z", "2099-01-01T00:00:00Z"), px=3_600_000
    )
    with Console(config, actor=ACTOR) as console:
        [seen] = [h for h in console.snapshot(duplicates=False).holders if h.key == key]
    assert seen.stale and "far past max_duration" in seen.stale
    client.delete(key)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ('[databases.c]\nurl = "redis://h/0"\n[jobs.j]\nstrategy = "redis"\n', "ledger_database"),
        (
            '[lockconsole]\nledger_database = "c"\n[databases.c]\nurl = "redis://h/0"\n',
            "the ledger needs PostgreSQL, MySQL or SQLite",
        ),
        (
            '[lockconsole]\nledger_database = "l"\n[databases.l]\nurl = "sqlite:///x.db"\n'
            '[databases.c]\nurl = "redis://h/0"\n[jobs.j]\ndatabase = "c"\nstrategy = "lease"\n',
            "lease needs a",
        ),
        (
            '[lockconsole]\nledger_database = "l"\n[databases.l]\nurl = "sqlite:///x.db"\n'
            '[databases.c]\nurl = "redis://h/0"\n[jobs.j]\ndatabase = "c"\nstrategy = "redis"\n'
            'redis_prefix = "job-lock:*"\n',
            "must not contain",
        ),
    ],
)
def test_config_errors_are_one_clear_line(text: str, expected: str, write_config, cli_env) -> None:
    config = write_config(text)
    proc = lockconsole(config, "locks", env=cli_env)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 2, (out, err)
    assert expected in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_redis_url_password_is_masked() -> None:
    url = parse_url("rediss://default:s3cr%40t@cache.example:6380/1")
    assert url.dialect == "redis" and url.password == "s3cr@t" and url.port == 6380
    assert "s3cr" not in url.masked and url.masked.startswith("rediss://default:***@")


RUNNER_ACL = "+get +set +incr +pexpire +del +evalsha +script|load"
VIEWER_ACL = "+scan +get +pttl"
RELEASER_ACL = "+scan +get +pttl +del +eval"


def test_least_privilege_acl_accounts(redis_url: str, client: redis.Redis, uid: str) -> None:
    """The README's ACL lines are enough: run, list and release with nothing more."""
    keys = "~job-lock:* ~lockconsole:*"
    # a URL naming a database other than 0 makes the client SELECT it (the README says so)
    select = ["+select"] if client.connection_pool.connection_kwargs.get("db", 0) else []
    users = {}
    for role, acl in (("run", RUNNER_ACL), ("view", VIEWER_ACL), ("release", RELEASER_ACL)):
        name = f"lc_{role}_{uid}"
        client.execute_command(
            "ACL", "SETUSER", name, "reset", "on", ">pw", *keys.split(), *acl.split(), *select
        )
        host = redis_url.split("://", 1)[1]
        users[role] = Database(
            "cache", parse_url(f"redis://{name}:pw@{host}"), scan_prefixes=("job-lock:",)
        )
    try:
        job = _job(uid, min_hold=timedelta(minutes=1))
        with RedisLock(job, users["run"], owner="a") as lock:
            ledger = Ledger(Database("ledger", parse_url(f"sqlite:///{_tmp_db(uid + 'l')}")))
            assert lock.acquire() and lock.still_held() and lock.issue_token(ledger)
            ledger.close()
            lock.release()  # lockAtLeastFor: PEXPIRE
        client.script_flush()  # the runner loads the scripts again itself
        with RedisLock(_job(uid + "b"), users["run"], owner="a") as lock:
            assert lock.acquire()
            lock.release()  # DEL
        viewer = RedisInspector(users["view"])
        try:
            [seen] = [h for h in viewer.holders([job]).holders if h.job == job.name]
            assert seen.fencing_token and seen.lock_until is not None
        finally:
            viewer.close()
        releaser = RedisInspector(users["release"])
        audit = AuditLog(Database("audit", parse_url(f"sqlite:///{_tmp_db(uid)}")))
        try:
            assert releaser.release(seen, actor=ACTOR, audit=audit).status == "released"
        finally:
            audit.close()
            releaser.close()
        with pytest.raises(redis.exceptions.NoPermissionError):
            RedisInspector(users["view"])._redis().delete("job-lock:default:x")
    finally:
        for role in users:
            client.execute_command("ACL", "DELUSER", f"lc_{role}_{uid}")


def test_release_modal_text_shows_the_exact_value_literally() -> None:
    from rich.console import Console as RichConsole

    from lockconsole.model.views import Holder
    from lockconsole.tui.screens.confirm import holder_details, release_target

    value = "[bold red]ADDED:x@[/]host:[link=file:///]u"
    holder = Holder(
        "cache",
        "redis",
        "job-lock:default:[i]n[/i]",
        "name",
        True,
        "SCAN job-lock:*",
        locked_by="[b]host",
        value=value,
    )
    assert value in release_target(holder) and "[i]n[/i]" in release_target(holder)
    out = RichConsole(width=400, record=True, color_system=None)
    out.print(holder_details(holder))
    text = out.export_text()
    assert value in text and "job-lock:default:[i]n[/i]" in text and "[b]host" in text
