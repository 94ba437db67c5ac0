"""`lockconsole metrics` on a real PostgreSQL: /metrics scraped over HTTP and parsed with
prometheus_client's own parser, the figures checked against the ledger and pg_locks as the test
made them; the textfile written atomically; bad input and a missing extra refused in one line."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import urllib.request
from collections import Counter
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from prometheus_client.parser import text_string_to_metric_families
from psycopg import sql

from lockconsole import run_once
from lockconsole.backends.ledger.store import Ledger
from lockconsole.config.loader import Config, load_config
from lockconsole.console.facade import Console
from lockconsole.metrics.figures import slot_statuses
from lockconsole.model.jobs import Run

from tests.support.helpers import wait_for

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def _config_text(url: str, jobs: list[str], extra: str = "") -> str:
    lines = [
        "[console]",
        'grace = "1s"',
        'idle_threshold = "1s"',  # an idle holder of an unmapped key is stale after a second
        "[databases.main]",
        f"url = {json.dumps(url)}",
        "[databases.down]",  # nothing listens on port 1: this database is down
        'url = "postgresql://postgres@127.0.0.1:1/nothing"',
    ]
    for job in jobs:
        lines += [f"[jobs.{job}]", 'database = "main"', 'schedule = "0 2 * * *"']
    return "\n".join(lines) + "\n" + extra


def parse(text: str) -> Samples:
    """Every sample of an exposition, by (name, sorted labels)."""
    return {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }


def value(samples: Samples, name: str, **labels: str) -> float | None:
    return samples.get((f"lockconsole_{name}", tuple(sorted(labels.items()))))


def ledger_runs(config: Config, job: str) -> list[Run]:
    with Ledger(config.ledger_for(config.job(job))) as ledger:
        return ledger.runs(job)


def advisory_counts(pg_url: str) -> tuple[int, int]:
    """(granted, waiting) advisory locks in `pg_url`'s database, as pg_locks shows them."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        row = conn.execute(
            "SELECT count(*) FILTER (WHERE granted), count(*) FILTER (WHERE NOT granted) "
            "FROM pg_locks WHERE locktype = 'advisory' "
            "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())"
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


@pytest.fixture
def serving(
    tmp_path: Path, cli_env: dict[str, str]
) -> Iterator[tuple[list[subprocess.Popen[str]], Path]]:
    """Processes started by the test, stopped (by their pid) at the end."""
    started: list[subprocess.Popen[str]] = []
    yield started, tmp_path
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait()


def _serve(config: Path, env: dict[str, str]) -> tuple[subprocess.Popen[str], str]:
    process = subprocess.Popen(
        [sys.executable, "-m", "lockconsole", "--config", str(config), "metrics"]
        + ["--listen", "127.0.0.1:0"],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    assert process.stderr is not None
    line = process.stderr.readline()  # the one line naming the bound address
    assert line.startswith("serving metrics on http://127.0.0.1:"), line
    return process, line.split(" on ", 1)[1].strip()


def test_http_metrics_match_the_ledger_and_pg_locks(
    own_database: str, uid: str, write_config, cli_env, serving
) -> None:
    # a database of its own: the holders and waiters counted are the whole database's, and
    # other tests take and let go of advisory locks in the shared one between two readings
    pg_url = own_database
    ok, held = f"m_ok_{uid}", f"m_held_{uid}"
    path = write_config(_config_text(pg_url, [ok, held]))
    config = load_config(str(path))
    with run_once(ok, config=config, instance="web-1") as first:
        assert first.acquired
    with run_once(held, config=config, instance="web-1") as holder:
        assert holder.acquired
        with run_once(held, config=config, instance="web-2") as second:
            assert not second.acquired
        key = config.job(held).key.int64()
        waiter = psycopg.connect(pg_url, autocommit=True)
        waiting = threading.Thread(
            target=lambda: waiter.execute("SELECT pg_advisory_lock(%s)", (key,)), daemon=True
        )
        waiting.start()
        wait_for(lambda: advisory_counts(pg_url)[1] >= 1, what="the waiter in pg_locks")
        idle = psycopg.connect(pg_url, autocommit=True)  # an idle session on an unmapped key
        row = idle.execute("SELECT pg_backend_pid(), pg_advisory_lock(%s)", (key + 1,)).fetchone()
        assert row is not None
        idle_pid = row[0]
        with Console(config, read_only=True) as console:
            wait_for(
                lambda: any(h.pid == idle_pid and h.stale for h in console.snapshot().holders),
                what="the idle holder shown stale",
            )
        before = advisory_counts(pg_url)
        process, url = _serve(path, cli_env)
        serving[0].append(process)
        with urllib.request.urlopen(url, timeout=60) as answer:
            assert answer.status == 200
            samples = parse(answer.read().decode())
        after = advisory_counts(pg_url)
        ledger = {job: ledger_runs(config, job) for job in (ok, held)}  # as it was scraped
        with Console(config, read_only=True) as console:  # what the console shows meanwhile
            stale_shown = sum(h.granted and bool(h.stale) for h in console.snapshot().holders)
    idle.close()
    waiting.join(timeout=30)
    waiter.execute("SELECT pg_advisory_unlock_all()")
    waiter.close()

    for job in (ok, held):  # attempts by outcome and instance: exactly the ledger's
        expected = Counter((r.outcome, r.instance) for r in ledger[job])
        got = {
            (dict(labels)["outcome"], dict(labels)["instance_name"]): v
            for (name, labels), v in samples.items()
            if name == "lockconsole_job_attempts" and dict(labels)["job_name"] == job
        }
        assert got == {k: float(v) for k, v in expected.items()}
    assert (
        value(samples, "job_attempts", job_name=held, outcome="skipped", instance_name="web-2") == 1
    )
    (done,) = ledger[ok]
    assert done.finished_at is not None
    last = value(samples, "job_last_success_timestamp_seconds", job_name=ok)
    assert last == pytest.approx(done.finished_at.timestamp(), abs=1e-3)
    assert value(samples, "job_last_success_timestamp_seconds", job_name=held) is None
    started = max(r.started_at for r in ledger[held])
    last_attempt = value(samples, "job_last_attempt_timestamp_seconds", job_name=held)
    assert last_attempt == pytest.approx(started.timestamp(), abs=1e-3)
    for status in slot_statuses():  # every status is there, 0 or not
        assert value(samples, "job_slots", job_name=ok, status=status) == (status == "ok")
        assert value(samples, "job_slots", job_name=held, status=status) == (status == "running")
    assert value(samples, "job_period_seconds", job_name=ok) == 86400
    assert value(samples, "job_grace_seconds", job_name=ok) == 1
    # holders and waiters: what pg_locks showed around the scrape (nothing moved meanwhile)
    assert before == after and after[1] >= 1
    assert value(samples, "database_holders", database="main") == after[0]
    assert value(samples, "database_waiters", database="main") == after[1]
    assert value(samples, "database_stale_holders", database="main") == stale_shown >= 1
    assert value(samples, "database_up", database="main") == 1
    assert value(samples, "database_up", database="down") == 0
    assert value(samples, "database_holders", database="down") is None
    read = value(samples, "database_read_seconds", database="main")
    assert read is not None and read > 0
    scrape = value(samples, "scrape_duration_seconds")
    assert scrape is not None and scrape > 0
    labels = {k for (_, pairs) in samples for k, _ in pairs}
    assert labels <= {
        "job_name",
        "database",
        "outcome",
        "instance_name",
        "status",
    }  # bounded: no pid, key
    process.send_signal(signal.SIGTERM)
    assert process.wait(timeout=30) == 0


def test_textfile_is_replaced_atomically_with_duplicate_counts(
    pg_url: str, pg_conn, uid: str, write_config, cli_env, tmp_path: Path
) -> None:
    job, table = f"m_dup_{uid}", f"m_invoices_{uid}"
    pg_conn.execute(
        sql.SQL("CREATE TABLE {} (tenant int, period text)").format(sql.Identifier(table))
    )
    try:
        pg_conn.execute(
            sql.SQL("INSERT INTO {} VALUES (1, 'a'), (1, 'a'), (1, 'a'), (2, 'a')").format(
                sql.Identifier(table)
            )
        )
        idempotency = f'[jobs.{job}.idempotency]\ntable = "{table}"\nkey = ["tenant", "period"]\n'
        path = write_config(_config_text(pg_url, [job], idempotency))
        out = tmp_path / "prom"
        out.mkdir()
        target = out / "lockconsole.prom"
        target.write_text("old\n")
        old = open(target)  # noqa: SIM115  (kept open across the write on purpose)
        try:
            done = subprocess.run(
                [sys.executable, "-m", "lockconsole", "--config", str(path), "metrics"]
                + ["--textfile", str(target)],
                capture_output=True,
                text=True,
                env=cli_env,
                timeout=120,
            )
            assert done.returncode == 0, done.stderr
            # replaced by a rename, never rewritten in place: the old file is intact
            assert old.read() == "old\n"
        finally:
            old.close()
    finally:
        pg_conn.execute(sql.SQL("DROP TABLE {}").format(sql.Identifier(table)))
    # no temporary left; the counters' state and its lock are hidden, and not *.prom
    assert sorted(p.name for p in out.iterdir()) == [
        ".lockconsole.prom.counters.json",
        ".lockconsole.prom.counters.json.lock",
        "lockconsole.prom",
    ]
    assert target.stat().st_mode & 0o777 == 0o644
    samples = parse(target.read_text())
    assert value(samples, "job_duplicate_groups", job_name=job) == 1
    assert value(samples, "job_duplicate_surplus_rows", job_name=job) == 2
    assert value(samples, "database_up", database="down") == 0
    assert value(samples, "slots_total", job_name=job, status="ok") == 0  # the first run: 0


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["--listen", "nowhere"], "--listen takes HOST:PORT"),
        (["--listen", "127.0.0.1:99999"], "--listen takes HOST:PORT"),
        (["--textfile", "metrics.txt"], "must end in .prom"),
        (["--textfile", "/no/such/folder/x.prom"], "does not exist"),
        ([], "one of the arguments --listen --textfile is required"),
    ],
)
def test_bad_metrics_arguments_are_one_line(
    args: list[str], expected: str, cli_env, tmp_path: Path
) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "lockconsole", "metrics", *args],
        capture_output=True,
        text=True,
        env=cli_env,
        cwd=tmp_path,
        timeout=60,
    )
    assert done.returncode == 2
    assert expected in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert list(tmp_path.glob("*.prom")) == []


def test_a_port_in_use_is_one_line(write_config, pg_url: str, cli_env) -> None:
    path = write_config(_config_text(pg_url, []))
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-m", "lockconsole", "--config", str(path), "metrics"]
            + ["--listen", f"127.0.0.1:{port}"],
            capture_output=True,
            text=True,
            env=cli_env,
            timeout=60,
        )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        f"lockconsole: metrics: cannot listen on 127.0.0.1:{port}: Address already in use"
    )


def test_missing_extra_names_it(cli_env, tmp_path: Path) -> None:
    code = (
        "import sys; sys.modules['prometheus_client'] = None\n"
        "from lockconsole.cli.main import main\n"
        f"sys.exit(main(['metrics', '--textfile', {str(tmp_path / 'x.prom')!r}]))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=cli_env, timeout=60
    )
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "lockconsole: metrics: the prometheus_client package is not installed; "
        "install the extra: pip install 'lockconsole[metrics]'"
    )
    assert not os.path.exists(tmp_path / "x.prom")


@pytest.mark.parametrize(
    ("schedule", "seconds"),
    [
        ("0 2 * * *", 86400),
        ("0 2 * * 1-5", 3 * 86400),  # Friday to Monday is the longest gap
        ("*/15 * * * *", 900),
        (None, None),  # no schedule: no period, so no no-success alert
    ],
)
def test_period_is_the_longest_gap_between_firings(
    schedule: str | None, seconds: float | None
) -> None:
    from datetime import UTC, datetime

    from lockconsole.metrics.figures import period
    from lockconsole.model.jobs import Job, LockKey

    key = LockKey("int64", 1)
    job = Job(name="j", database="main", strategy="pg-session", key=key, schedule=schedule)
    assert period(job, datetime(2026, 12, 1, 7, 0, tzinfo=UTC)) == seconds


def test_textfile_counters_go_on_from_the_last_run(
    pg_url: str, uid: str, write_config, cli_env, tmp_path: Path
) -> None:
    job = f"m_tf_{uid}"
    path = write_config(_config_text(pg_url, [job]))
    config = load_config(str(path))
    target = tmp_path / "lockconsole.prom"

    def write() -> tuple[Samples, str]:
        done = subprocess.run(
            [sys.executable, "-m", "lockconsole", "--config", str(path), "metrics"]
            + ["--textfile", str(target)],
            capture_output=True,
            text=True,
            env=cli_env,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr
        return parse(target.read_text()), done.stderr

    with run_once(job, config=config, instance="web-1") as first:
        assert first.acquired
    ok = {"job_name": job, "outcome": "succeeded", "instance_name": "web-1"}
    assert value(write()[0], "attempts_total", **ok) == 0  # there before the first run: the base
    with run_once(job, config=config, instance="web-1") as again:  # the slot is done: skipped
        assert not again.acquired
    skipped = {"job_name": job, "outcome": "skipped", "instance_name": "web-1"}
    assert value(write()[0], "attempts_total", **skipped) == 1  # counted by the next run
    assert value(write()[0], "attempts_total", **skipped) == 1  # and only once
    state = tmp_path / ".lockconsole.prom.counters.json"
    state.write_text("{not json")
    samples, said = write()
    assert said.splitlines()[0] == (
        "metrics: .lockconsole.prom.counters.json is not a counter state this version reads "
        "(JSONDecodeError); the counters start again at 0"
    )
    assert value(samples, "attempts_total", **skipped) == 0
    assert json.loads(state.read_text())["version"] == 1  # written afresh
