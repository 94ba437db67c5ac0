"""End to end: the real `lockconsole` console in a real terminal (tmux) over a PostgreSQL
database of its own shows every attempt the ledger holds, and the audit of what it did.

Attempts of every kind are made with the real `lockconsole run`, each on an instance name of
its own so that its row can be found on screen: a scheduled run that succeeded, one that
skipped (its slot had run), a manual run that succeeded, one that skipped (the lock was held),
a job without a schedule, a job of another configuration that shares the ledger, a failed run
and a run that lost its lock (its session terminated while the job ran). The console then
opens: its first frame with data must show each of them under its slot, with its outcome.
Then a trigger from the console and a force-release of a held lock, and the audit screen
(`a`) lists both, with who asked.
"""

from __future__ import annotations

import getpass
import os
import re
import shutil
import socket
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from lockconsole.backends.ledger.store import Ledger
from lockconsole.config.loader import load_config
from lockconsole.model.jobs import Run
from lockconsole.text.times import clock

from tests.support.helpers import CI, Tmux, wait_for
from tests.support.settings import ROOT

ACTOR = f"{getpass.getuser()}@{socket.gethostname()}"
WIDTH, HEIGHT = 220, 60
REFRESH = "1s"


def config_text(url: str, *jobs: str) -> str:
    text = f'[console]\nrefresh = "{REFRESH}"\n[databases.main]\nurl = "{url}"\n'
    specs = {
        "mjob": 'strategy = "pg-session"\ncommand = ["true"]\n',
        "ajob": 'strategy = "pg-session"\nschedule = "0 2 * * *"\nwatchdog_interval = 0.2\n',
        "pjob": 'strategy = "pg-session"\n',
        "other": 'strategy = "pg-session"\n',
    }
    return text + "".join(f"[jobs.{job}]\n{specs[job]}" for job in jobs)


def run(config: Path, *args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "lockconsole", "--config", str(config), "run", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def finish(proc: subprocess.Popen[str], code: int) -> None:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == code, (proc.args, proc.returncode, out, err)


def history_line(lines: list[str], instance: str) -> str | None:
    """The one line of the run history pane whose INSTANCE cell is `instance`."""
    start = next((i for i, line in enumerate(lines) if "Run history" in line), len(lines))
    found = [ln for ln in lines[start:] if instance in re.split(r"\s{2,}", ln.strip())]
    return found[0] if len(found) == 1 else None


def status_line(lines: list[str]) -> str | None:
    """The status line (databases, data age, alerts) once the first data is shown: it sits
    below the header line, which names the config file."""
    return next((ln for ln in lines[:3] if "data " in ln and "old" in ln), None)


def test_every_ledger_attempt_is_on_screen_and_the_audit_shows_release_and_trigger(
    own_database: str, tmp_path: Path, cli_env: dict[str, str]
) -> None:
    if shutil.which("tmux") is None:
        if CI:
            pytest.fail("tmux is needed (apt-get install tmux)")
        pytest.skip("tmux is not installed")
    ours = tmp_path / "lockconsole.toml"
    ours.write_text(config_text(own_database, "mjob", "ajob", "pjob"))
    theirs = tmp_path / "theirs.toml"  # another team's config, sharing the ledger
    theirs.write_text(config_text(own_database, "other"))
    config = load_config(str(ours))
    now = datetime.now(UTC)
    today = now.replace(hour=2, minute=0, second=0, microsecond=0)
    if today > now:
        today -= timedelta(days=1)
    slots = [(today - timedelta(days=d)).isoformat() for d in range(3)]
    env = dict(cli_env)

    # scheduled: succeeded, then skipped (its slot had run)
    finish(run(ours, "ajob", "--slot", slots[0], "--instance", "i-sok", "--", "true", env=env), 0)
    finish(run(ours, "ajob", "--slot", slots[0], "--instance", "i-sskip", "--", "true", env=env), 3)
    # manual: succeeded, then skipped while another session holds the lock
    finish(run(ours, "--manual", "mjob", "--instance", "i-mok", env=env), 0)
    holder = psycopg.connect(own_database, autocommit=True)
    holder.execute("select pg_advisory_lock(%s)", (config.job("mjob").key.value,))
    finish(run(ours, "--manual", "mjob", "--instance", "i-mskip", env=env), 3)
    holder.close()
    # a job without a schedule; a job that is not in this configuration
    finish(run(ours, "pjob", "--instance", "i-plain", "--", "true", env=env), 0)
    finish(run(theirs, "other", "--instance", "i-other", "--", "true", env=env), 0)
    # a failed run; a run whose lock is lost while it runs
    finish(run(ours, "ajob", "--slot", slots[1], "--instance", "i-fail", "--", "false", env=env), 1)
    lost = run(
        ours, "ajob", "--slot", slots[2], "--instance", "i-lost", "--", "sleep", "60", env=env
    )

    def running() -> Run | None:
        with Ledger(config.databases["main"]) as ledger:
            return next((r for r in ledger.runs("ajob") if r.instance == "i-lost"), None)

    started = wait_for(running, what="the lost-lock run has started")
    with psycopg.connect(own_database, autocommit=True) as admin:
        admin.execute("select pg_terminate_backend(%s)", (started.session_id,))
    finish(lost, 4)

    with Ledger(config.databases["main"]) as ledger:
        attempts = ledger.runs()
    assert len(attempts) == 8
    assert {r.outcome for r in attempts} == {"succeeded", "skipped", "failed", "lock_lost"}

    binary = Path(sys.executable).with_name("lockconsole")
    command = [str(binary)] if binary.exists() else [sys.executable, "-m", "lockconsole"]
    tmux_env = {
        "PYTHONPATH": str(ROOT),
        "TERM": "xterm-256color",
        "HOME": os.environ.get("HOME", "/"),
        "LOCKCONSOLE_INSTANCE": "i-console",
    }
    term = Tmux([*command, "--config", str(ours)], tmux_env, WIDTH, HEIGHT)
    try:
        # the first frame with data (the first refresh) holds every attempt
        first = term.wait(lambda s: status_line(s) is not None, "the first data")
        shown_at = datetime.now(UTC)
        problems = []
        for attempt in attempts:
            line = history_line(first, attempt.instance)
            slot = clock(attempt.slot, shown_at)
            if line is None:
                problems.append(f"{attempt.instance}: not on screen")
            elif slot not in line or attempt.outcome not in line or attempt.job not in line:
                problems.append(f"{attempt.instance}: {slot} {attempt.outcome} not in {line!r}")
        assert not problems, "\n".join(problems + first)
        assert f"manual by {ACTOR}" in (history_line(first, "i-mok") or "")
        assert f"manual by {ACTOR}" in (history_line(first, "i-mskip") or "")
        assert "not in this config" in (history_line(first, "i-other") or "")
        assert "scheduled" in (history_line(first, "i-sskip") or "")
        assert "LOCK LOST" in (history_line(first, "i-lost") or "")
        assert "FAILED" in (history_line(first, "i-fail") or "")
        # the failed and lost-lock slots are this config's alerts
        assert "alerts" in (status_line(first) or "")
        assert "other" not in " ".join(line for line in first if "⚠" in line)

        # a trigger from the console (mjob is the first job), then a force-release
        term.keys("1", "t")
        term.wait(lambda s: any("Run mjob now?" in ln for ln in s), "the trigger question")
        term.keys("h")  # here: this console runs it, as instance i-console
        term.wait(
            lambda s: (
                (line := history_line(s, "i-console")) is not None
                and "succeeded" in line
                and f"manual by {ACTOR}" in line
            ),
            "the console's trigger in the history",
        )
        lock = psycopg.connect(own_database, autocommit=True)
        try:
            lock.execute("select pg_advisory_lock(%s)", (config.job("ajob").key.value,))
            term.wait(lambda s: any("● held" in ln for ln in s), "the held lock")
            term.keys("2", "x")
            term.wait(lambda s: any("Type the job name" in ln for ln in s), "the release modal")
            term.type("ajob")
            term.keys("Enter")
            term.wait(lambda s: not any("● held" in ln for ln in s), "the lock released")
        finally:
            lock.close()
        term.keys("1", "a")

        def audit_row(lines: list[str], action: str, has: str) -> str | None:
            start = next((i for i, ln in enumerate(lines) if ln.startswith(" Audit ·")), None)
            if start is None:
                return None
            rows = [
                ln
                for ln in lines[start:]
                if action in re.split(r"\s{2,}", ln.strip()) and has in ln
            ]
            return rows[0] if len(rows) == 1 else None

        audit = term.wait(
            lambda s: (
                "released" in (audit_row(s, "release", "ajob") or "")
                and "succeeded" in (audit_row(s, "trigger", "i-console") or "")
            ),
            "the audit screen with the release and the trigger",
        )
        release = audit_row(audit, "release", "ajob") or ""
        assert ACTOR in release and "pg advisory key" in release
        assert ACTOR in (audit_row(audit, "trigger", "i-console") or "")
        # the manual runs of `lockconsole run --manual` were audited too, with their result
        assert "succeeded" in (audit_row(audit, "trigger", "i-mok") or "")
        assert "skipped" in (audit_row(audit, "trigger", "i-mskip") or "")
        assert "times UTC" in " ".join(audit)
        term.keys("Escape", "q")
    finally:
        term.close()
