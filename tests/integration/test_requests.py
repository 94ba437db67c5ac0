"""Run now on the fleet: `lockconsole request` queues a row in the ledger's database; real
`lockconsole schedule` instances (PostgreSQL through LISTEN/NOTIFY, MariaDB and SQLite by
polling) race for it and exactly one runs it; the row ends with that run's id and outcome. A
request nobody takes expires with its reason; a missed slot asked again turns ok, and a slot
that succeeded is refused unless --force (audited)."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from lockconsole.backends.factory import open_lock
from lockconsole.backends.ledger import requests
from lockconsole.backends.ledger.store import Ledger
from lockconsole.config.loader import load_config, parse_config
from lockconsole.model.slots import utcnow
from lockconsole.serving import RequestServer

from tests.integration.test_controls import audit_rows, fleet_config
from tests.support.helpers import DEADLINE, wait_for
from tests.support.runner_helpers import lockconsole, runs_of

INSTANCES = ("web-1", "web-2", "web-3")


def cli(config: Path, *words: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "lockconsole", "--config", str(config), *words],
        capture_output=True,
        text=True,
        env=env,
        timeout=180,
        stdin=subprocess.DEVNULL,
    )


class Fleet:
    """`lockconsole schedule` on web-1..3, serving requests until stopped."""

    def __init__(self, config: Path, env: dict[str, str], instances=INSTANCES) -> None:
        self.procs = [lockconsole(config, "schedule", "--instance", i, env=env) for i in instances]

    def stop(self) -> None:
        for proc in self.procs:
            proc.send_signal(signal.SIGTERM)
        for proc in self.procs:
            assert proc.wait(timeout=60) == 0, proc.communicate()[1]


def request_json(done: subprocess.CompletedProcess[str]) -> dict[str, object]:
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.mysql
def test_three_instances_one_request_exactly_one_runs_it(
    dialect_url, uid, write_config, cli_env, tmp_path
):
    job = f"asked_{uid}"
    marks = tmp_path / "marks"
    config = fleet_config(write_config, dialect_url, job, marks, "0 2 * * *")
    fleet = Fleet(config, cli_env)
    try:
        done = cli(config, "request", job, "--timeout", "120s", "--json", env=cli_env)
        assert done.returncode == 0, done.stderr
        final = request_json(done)
        assert final["state"] == "succeeded" and final["served_by"] in INSTANCES
    finally:
        fleet.stop()
    runs = runs_of(config, job)
    assert [(r.id, r.outcome, r.trigger) for r in runs] == [
        (final["run_id"], "succeeded", "manual")
    ]
    assert runs[0].instance == final["served_by"]
    assert marks.read_text() == "ran\n"


def test_a_request_for_one_instance_goes_there_and_progress_is_printed(
    pg_url, uid, write_config, cli_env, tmp_path
):
    job = f"there_{uid}"
    config = fleet_config(write_config, pg_url, job, tmp_path / "marks", "0 2 * * *")
    fleet = Fleet(config, cli_env)
    try:
        done = cli(config, "request", job, "--instance", "web-2", env=cli_env)
    finally:
        fleet.stop()
    assert done.returncode == 0, done.stderr
    lines = done.stdout.strip().splitlines()
    assert lines[0].endswith(f": queued for {job}")
    assert lines[-1].startswith("request ") and " succeeded on web-2 (run " in lines[-1]
    assert [r.instance for r in runs_of(config, job)] == ["web-2"]


@pytest.mark.mysql
def test_a_request_nobody_takes_expires_with_its_reason(
    dialect_url, uid, write_config, cli_env, tmp_path
):
    job = f"unserved_{uid}"
    config = fleet_config(write_config, dialect_url, job, tmp_path / "marks", "0 2 * * *")
    done = cli(config, "request", job, "--timeout", "1s", "--json", env=cli_env)
    assert done.returncode == 1, done.stderr
    final = request_json(done)
    assert final["state"] == "expired" and final["run_id"] is None
    assert "no instance serving the job took it" in str(final["reason"])
    assert runs_of(config, job) == []


def _last_two_am(now: datetime) -> datetime:
    slot = (now - timedelta(minutes=6)).replace(hour=2, minute=0, second=0, microsecond=0)
    return slot if slot <= now - timedelta(minutes=6) else slot - timedelta(days=1)


@pytest.mark.mysql
def test_a_missed_slot_rerun_turns_ok_and_a_second_needs_force(
    dialect_url, uid, write_config, cli_env, tmp_path
):
    job = f"missed_{uid}"
    marks = tmp_path / "marks"
    config = fleet_config(write_config, dialect_url, job, marks, "0 2 * * *")
    slot = _last_two_am(datetime.now(UTC)).isoformat()
    cfg = load_config(str(config))
    # the job's own lock, held elsewhere: web-1 skips (each lock class is a context manager,
    # which the Lock protocol does not declare)
    holder: Any = open_lock(
        cfg.job(job), cfg.database_for(cfg.job(job)), instance="web-0", application_name="test"
    )
    with holder:
        assert holder.acquire()
        done = cli(config, "run", job, "--slot", slot, "--instance", "web-1", env=cli_env)
        assert done.returncode == 3, done.stderr

    seen: list[str] = []

    def alerts() -> list[str]:
        check = cli(config, "check", "--json", "--no-duplicates", env=cli_env)
        seen.append(check.stdout + check.stderr)  # for the assertion's message
        return [a["kind"] for a in json.loads(check.stdout)["alerts"] if a["job"] == job]

    assert alerts() == ["missed"], seen[-1]
    fleet = Fleet(config, cli_env, ("web-2",))
    try:
        rerun = cli(config, "request", job, "--slot", slot, "--json", env=cli_env)
        assert rerun.returncode == 0, rerun.stderr
        assert request_json(rerun)["state"] == "succeeded"
        assert alerts() == []  # the slot is ok now
        again = cli(config, "request", job, "--slot", slot, "--json", env=cli_env)
        assert again.returncode == 3, again.stderr  # once_per_slot: it already succeeded
        assert "slot already ran" in str(request_json(again)["reason"])
        forced = cli(config, "request", job, "--slot", slot, "--force", "--json", env=cli_env)
        assert forced.returncode == 0, forced.stderr
    finally:
        fleet.stop()
    assert marks.read_text() == "ran\nran\n"
    actions = [(a, r) for a, _, r in audit_rows(config, job)]
    assert actions == [("request", "queued"), ("request", "queued"), ("request_forced", "queued")]


APP = """
import sys, threading
from lockconsole import serve_requests

def nightly_billing():
    print("billing from the app")

server = serve_requests({sys.argv[1]: nightly_billing}, config=sys.argv[2], instance="app-1")
print("serving", flush=True)
sys.stdin.read()  # until the test closes stdin
server.stop()
"""


def test_a_run_once_app_serves_requests_with_one_call(pg_url, uid, write_config, cli_env, tmp_path):
    job = f"in_app_{uid}"
    config = fleet_config(write_config, pg_url, job, tmp_path / "marks", "0 2 * * *")
    app = subprocess.Popen(
        [sys.executable, "-c", APP, job, str(config)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env,
    )
    try:
        assert app.stdout is not None and app.stdout.readline() == "serving\n"
        done = cli(config, "request", job, "--json", env=cli_env)
        assert done.returncode == 0, done.stderr
        final = request_json(done)
        assert final["served_by"] == "app-1" and final["state"] == "succeeded"
    finally:
        app.communicate("", timeout=60)
    assert app.returncode == 0
    runs = runs_of(config, job)
    assert [(r.instance, r.outcome) for r in runs] == [("app-1", "succeeded")]
    assert not (tmp_path / "marks").exists()  # the app's function ran, not the config's command


def test_a_notify_wakes_a_server_that_polls_hourly_beside_a_sqlite_ledger(pg_url, uid, tmp_path):
    """The server polls once an hour, so only the request's NOTIFY can get it served before the
    deadline; the server also serves a job whose ledger is SQLite, so it LISTENs on PostgreSQL
    with several ledgers too, and it LISTENs before its first look (`looked`)."""
    pg_job, lite_job = f"woken_{uid}", f"polled_{uid}"
    config = parse_config(
        f'[databases.main]\nurl = "{pg_url}"\n'
        f'[databases.lite]\nurl = "sqlite:///{tmp_path / "lite.db"}"\n'
        f'[jobs.{pg_job}]\ndatabase = "main"\n'
        f'[jobs.{lite_job}]\ndatabase = "lite"\nstrategy = "lease"\n',
        "<test>",
    )
    ran = threading.Event()
    targets = {pg_job: ran.set, lite_job: lambda: None}
    jobs = list(config.jobs.values())
    server = RequestServer(config, jobs, instance="web-1", targets=targets, poll=3600.0)
    server.start()
    try:
        assert server.looked.wait(DEADLINE), "the server's first look"
        with Ledger(config.ledger_for(config.job(pg_job))) as ledger:
            now = utcnow()
            asked = requests.submit(
                ledger,
                pg_job,
                slot=None,
                instance=None,
                forced=False,
                requested_by="test",
                now=now,
                expires_at=now + timedelta(hours=1),
            )
            assert ran.wait(DEADLINE), "only a NOTIFY could wake a server that polls hourly"

            def final() -> requests.Request | None:
                found = requests.get(ledger, asked)
                return found if found is not None and found.final else None

            done = wait_for(final, what="the request's outcome")
    finally:
        server.stop()
    assert (done.state, done.served_by) == ("succeeded", "web-1")
