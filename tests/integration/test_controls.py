"""Pause and resume a job on the whole fleet: real `lockconsole schedule` processes on
PostgreSQL, MariaDB and SQLite (the lease path) find the pause in the ledger's database on their
next attempt, record it as "paused" (with the note and who paused it) and run nothing; `check`
reports a paused slot as paused, not missed; a pause with --until ends by itself; pauses and
resumes are audited."""

from __future__ import annotations

import json
import signal
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import text

from lockconsole import run_once
from lockconsole.backends.sa import engine_for
from lockconsole.config.loader import load_config
from lockconsole.model.slots import utcnow

from tests.support.cli import run_cli
from tests.support.helpers import wait_for
from tests.support.runner_helpers import lockconsole, runs_of

STRATEGY = {"postgresql": "pg-session", "mysql": "mysql", "sqlite": "lease"}
MARK = "import sys\nwith open(sys.argv[1], 'a') as f:\n    f.write('ran\\n')\n"


def fleet_config(write_config, url: str, job: str, marks: Path, schedule: str) -> Path:
    dialect = "sqlite" if url.startswith("sqlite") else "mysql" if "mysql" in url else "postgresql"
    script = marks.parent / "mark.py"
    script.write_text(MARK, encoding="utf-8")
    return write_config(
        f"""
        [databases.main]
        url = "{url}"
        [jobs.{job}]
        strategy = "{STRATEGY[dialect]}"
        schedule = "{schedule}"
        command = ["{sys.executable}", "{script}", "{marks}"]
        """
    )


def audit_rows(config: Path, job: str) -> list[tuple[str, str, str]]:
    cfg = load_config(str(config))
    engine = engine_for(cfg.ledger_for(cfg.job(job)).url, dedicated=True)
    try:
        with engine.connect() as conn:
            rows = conn.execute(
                text(
                    "select action, target, result from lockconsole_audit"
                    " where job = :job order by id"  # pauses, resumes, requests name their job
                ),
                {"job": job},
            ).all()
    finally:
        engine.dispose()
    return [tuple(r) for r in rows]


@pytest.mark.mysql
def test_a_pause_is_seen_by_three_schedulers_within_one_attempt(
    dialect_url, uid, write_config, cli_env, tmp_path
):
    job = f"fleet_{uid}"
    marks = tmp_path / "marks"
    config = fleet_config(write_config, dialect_url, job, marks, "* * * * * *")
    instances = ("web-1", "web-2", "web-3")
    procs = [lockconsole(config, "schedule", "--instance", i, env=cli_env) for i in instances]
    try:
        wait_for(
            lambda: any(r.outcome == "succeeded" for r in runs_of(config, job)),
            what="a first run before the pause",
        )
        done = run_cli(config, "pause", job, "--note", "incident 42: invoices doubled", env=cli_env)
        assert done.returncode == 0, done.stderr
        assert "incident 42" in done.stdout
        paused_after = utcnow()  # the pause is committed: every attempt begun now must see it

        def paused_everywhere() -> bool:
            later = [r for r in runs_of(config, job) if r.started_at > paused_after]
            return {r.instance for r in later if r.outcome == "paused"} == set(instances)

        wait_for(paused_everywhere, what="a paused attempt on each of the three instances")
        later = [r for r in runs_of(config, job) if r.started_at > paused_after]
        assert {r.outcome for r in later} == {"paused"}, [(r.instance, r.outcome) for r in later]
        for run in later:
            assert run.message is not None
            assert "incident 42: invoices doubled" in run.message
            assert "paused by " in run.message

        done = run_cli(config, "resume", job, env=cli_env)
        assert done.returncode == 0, done.stderr
        resumed_after = utcnow()
        wait_for(
            lambda: any(
                r.outcome == "succeeded" and r.started_at > resumed_after
                for r in runs_of(config, job)
            ),
            what="a run after the resume",
        )
    finally:
        for proc in procs:
            proc.send_signal(signal.SIGTERM)
        for proc in procs:
            assert proc.wait(timeout=60) == 0, proc.communicate()[1]
    actions = [(a, r) for a, _, r in audit_rows(config, job)]
    assert actions == [("pause", "paused"), ("resume", "resumed")]


def _last_two_am(now: datetime) -> datetime:
    """The newest 02:00 UTC firing that is past the default grace (5 minutes)."""
    slot = (now - timedelta(minutes=6)).replace(hour=2, minute=0, second=0, microsecond=0)
    return slot if slot <= now - timedelta(minutes=6) else slot - timedelta(days=1)


@pytest.mark.mysql
def test_a_paused_slot_is_paused_not_missed_and_runs_after_resume(
    dialect_url, uid, write_config, cli_env, tmp_path
):
    job = f"nightly_{uid}"
    marks = tmp_path / "marks"
    config = fleet_config(write_config, dialect_url, job, marks, "0 2 * * *")
    slot = _last_two_am(datetime.now(UTC)).isoformat()
    assert run_cli(config, "pause", job, "--note", "hold billing", env=cli_env).returncode == 0
    for instance in ("web-1", "web-2"):
        done = run_cli(config, "run", job, "--slot", slot, "--instance", instance, env=cli_env)
        assert done.returncode == 3, done.stderr  # paused: like a skip, nothing ran
    assert not marks.exists()
    check = run_cli(config, "check", "--json", "--no-duplicates", env=cli_env)
    alerts = json.loads(check.stdout)["alerts"]
    assert [a for a in alerts if a["job"] == job] == [], alerts

    assert run_cli(config, "resume", job, env=cli_env).returncode == 0
    done = run_cli(config, "run", job, "--slot", slot, "--instance", "web-3", env=cli_env)
    assert done.returncode == 0, done.stderr
    assert marks.read_text() == "ran\n"
    outcomes = sorted((r.instance, r.outcome) for r in runs_of(config, job))
    assert outcomes == [("web-1", "paused"), ("web-2", "paused"), ("web-3", "succeeded")]


def test_pause_refuses_bad_input_with_one_line(pg_url, uid, write_config, cli_env, tmp_path):
    job = f"bad_{uid}"
    config = fleet_config(write_config, pg_url, job, tmp_path / "marks", "0 2 * * *")
    for words in (
        ["pause", f"nope_{uid}", "--note", "x"],
        ["pause", job],
        ["pause", job, "--note", "x", "--until", "soon"],
        ["pause", job, "--note", "x", "--until", "2020-01-01T00:00:00Z"],
        ["pause", job, "--note", "x", "--until", "2030-01-01T00:00:00"],
        ["pause", job, "--note", "   "],
        ["resume", f"nope_{uid}"],
    ):
        done = run_cli(config, *words, env=cli_env)
        assert done.returncode == 2, (words, done.stderr)
        assert len(done.stderr.strip().splitlines()) == 1, (words, done.stderr)
        assert "Traceback" not in done.stderr
    assert runs_of(config, job) == []
    assert run_cli(config, "resume", job, env=cli_env).returncode == 0  # not paused: nothing to end


def test_firings_nobody_attempted_while_paused_are_paused_not_missed() -> None:
    from lockconsole.console.snapshot.reports import alerts, slot_reports
    from lockconsole.model.jobs import Job, LockKey, Pause, Run

    hourly = Job("hourly", "main", "pg-session", LockKey("int64", 1), schedule="0 * * * *")
    now = datetime(2026, 12, 1, 12, 30, tzinfo=UTC)
    first = datetime(2026, 12, 1, 8, 0, tzinfo=UTC)
    ran = Run("hourly", first, "web-1", "h", 1, "scheduled", "succeeded", first, first)
    pause = Pause("hourly", "incident", "ops@laptop", datetime(2026, 12, 1, 9, 30, tzinfo=UTC))
    window: dict[str, Any] = {
        "now": now,
        "lookback": timedelta(days=1),
        "grace": timedelta(minutes=5),
    }
    without = {r.slot.hour: r.status for r in slot_reports([hourly], [ran], **window)}
    assert without == {8: "ok", 9: "missed", 10: "missed", 11: "missed", 12: "missed"}
    paused = slot_reports([hourly], [ran], pauses={"hourly": pause}, **window)
    by_hour = {r.slot.hour: r.status for r in paused}
    assert by_hour == {8: "ok", 9: "missed", 10: "paused", 11: "paused", 12: "paused"}
    assert [a.slot.hour for a in alerts(paused) if a.slot] == [9]


@pytest.mark.mysql
def test_a_pause_with_until_ends_by_itself(
    dialect_url, uid, write_config, cli_env, tmp_path, empty_registry
):
    job = f"until_{uid}"
    config = fleet_config(write_config, dialect_url, job, tmp_path / "marks", "0 2 * * *")
    done = run_cli(
        config, "pause", job, "--note", "deploy window", "--until", "3s", "--json", env=cli_env
    )
    assert done.returncode == 0, done.stderr
    assert json.loads(done.stdout)["schema"] == 1
    until = datetime.fromisoformat(json.loads(done.stdout)["paused"]["until"])
    cfg = load_config(str(config))

    def attempt_runs() -> bool:
        with run_once(job, config=cfg, instance="web-1", trigger="manual") as run:
            return run.acquired  # the body runs only once the pause has ended

    wait_for(attempt_runs, what="an attempt after --until to run", interval=0.2)
    runs = sorted(runs_of(config, job), key=lambda r: r.started_at)
    assert runs[-1].outcome == "succeeded" and runs[-1].started_at >= until
    for run in runs:  # paused exactly while the pause was in force, by each attempt's start
        assert (run.outcome == "paused") == (run.started_at < until), (run.started_at, until)
    assert run_cli(config, "resume", job, env=cli_env).returncode == 0  # nothing left to end
    actions = [(a, r) for a, _, r in audit_rows(config, job)]
    assert actions == [("pause", "paused"), ("resume", "not_paused")]


def test_a_read_only_console_reads_pauses_whether_the_table_comes_or_goes(tmp_path: Path) -> None:
    """Read-only, no control table is no pause; once seen, the table is not asked for again,
    and a table dropped since is no pause again (not an error)."""
    from lockconsole.backends.ledger.pauses import _HAS_TABLE, Pauses
    from lockconsole.backends.ledger.store import Ledger
    from lockconsole.config.urls import parse_url
    from lockconsole.model.jobs import Database, Pause

    db = Database("main", parse_url(f"sqlite:///{tmp_path / 'ledger.db'}"))
    now = datetime.now(UTC)
    with Ledger(db, read_only=True) as reader, Ledger(db) as writer:
        assert Pauses(reader).pauses(now) == {}
        Pauses(writer).pause(Pause("billing", "incident", "ops@laptop", now))
        assert list(Pauses(reader).pauses(now)) == ["billing"]
        assert reader in _HAS_TABLE
        with writer.sa_engine().begin() as conn:
            conn.execute(text("DROP TABLE lockconsole_controls"))
        assert Pauses(reader).pauses(now) == {}
        assert reader not in _HAS_TABLE
