"""`lockconsole demo`: the headless demo on its own embedded PostgreSQL, end to end.

The demo runs in a subprocess with a temporary XDG_STATE_HOME (never a user's demo data);
while it runs, the test reads the scenario through the written config (Console, Ledger,
duplicates.summary); afterwards no postgres or fleet process of the demo may be left.
"""

from __future__ import annotations

import json
import os
import queue
import subprocess
import threading
import time
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psutil
import pytest

from lockconsole.demo.instance import AlignedClock
from lockconsole.demo.scenario import night_schedule

from tests.support.helpers import DEADLINE
from tests.support.settings import PYTHON, ROOT

NIGHT = 6  # a night with room for its billing run (a quarter of it) on a busy 2-core machine
RUN_FOR = 20


def _env(tmp_path: Path) -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env["XDG_STATE_HOME"] = str(tmp_path / "state")
    env.pop("LOCKCONSOLE_CONFIG", None)
    env["NO_COLOR"] = "1"
    env.pop("XDG_RUNTIME_DIR", None)  # as under cron or `su`: not a reason to warn
    return env


def _lines(stream: Iterable[str], into: queue.Queue[str]) -> None:
    for line in stream:
        into.put(line)


def _wait_for(lines: queue.Queue[str], prefix: str, seen: list[str], timeout: float) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            line = lines.get(timeout=0.5)
        except queue.Empty:
            continue
        seen.append(line)
        if line.startswith(prefix):
            return line
    raise AssertionError(f"no line starting {prefix!r} within {timeout}s:\n{''.join(seen)}")


def _left_behind(state: Path, pids: list[int]) -> list[str]:
    """Processes of the demo still running: known pids, or anything naming the state dir."""
    found = []
    for proc in psutil.process_iter(["pid", "cmdline", "status"]):
        try:
            if proc.info["status"] == psutil.STATUS_ZOMBIE:
                continue
            cmdline = " ".join(proc.info["cmdline"] or [])
        except psutil.Error:
            continue
        if proc.info["pid"] in pids or str(state) in cmdline:
            found.append(f"{proc.info['pid']} {cmdline[:120]}")
    return found


@pytest.mark.slow
def test_headless_demo_runs_once_per_night_and_leaves_nothing_behind(
    reachable_tmp: Path,
) -> None:
    from lockconsole.backends import duplicates
    from lockconsole.backends.ledger.store import Ledger
    from lockconsole.config.loader import load_config
    from lockconsole.console.facade import Console

    tmp_path = reachable_tmp  # the demo's embedded PostgreSQL keeps its data here
    state = tmp_path / "state"
    argv = [
        PYTHON,
        "-m",
        "lockconsole",
        "demo",
        "--headless",
        "--json",
        "--night-seconds",
        str(NIGHT),
        "--for",
        str(RUN_FOR),
    ]
    proc = subprocess.Popen(
        argv,
        env=_env(tmp_path),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    lines: queue.Queue[str] = queue.Queue()
    seen: list[str] = []
    reader = threading.Thread(target=_lines, args=(proc.stderr, lines), daemon=True)
    reader.start()
    pids: list[int] = []
    try:
        config_line = _wait_for(lines, "config: ", seen, 60)
        fleet_line = _wait_for(lines, "fleet started: ", seen, 30)
        words = fleet_line.split()
        pids = [int(w.rstrip(",;")) for p, w in zip(words, words[1:]) if p == "pid"]  # noqa: B905
        pgdata = state / "lockconsole" / "demo-pgdata"
        pids.append(int((pgdata / "postmaster.pid").read_text().split()[0]))
        config = load_config(config_line.split(": ", 1)[1].strip())
        job = config.job("nightly_billing")

        # the stale holder: listed as stale once its failed run has settled
        stale: list[Any] = []
        deadline = time.monotonic() + DEADLINE
        with Console(config, read_only=True) as console:
            while not stale and time.monotonic() < deadline:
                snap = console.snapshot()
                stale = [h for h in snap.holders if h.stale and h.job == "invoice_reminders"]
                time.sleep(0.5)
        assert stale, f"no stale invoice_reminders holder in {snap.holders}"
        assert stale[0].instance == "web-2"

        # the incident night's duplicates are still in invoices
        assert job.idempotency is not None
        found = duplicates.summary(config.databases["billing"], job.idempotency)
        assert (found.groups, found.surplus_rows, found.has_unique_key) == (120, 240, False)

        # the incident slot: three instances, each acquired and succeeded
        with Ledger(config.ledger_for(job)) as ledger:
            runs = ledger.runs("nightly_billing", limit=100)
        incident = min(r.slot for r in runs)
        at_incident = [r for r in runs if r.slot == incident]
        assert sorted(r.instance for r in at_incident) == ["web-1", "web-2", "web-3"]
        assert {r.outcome for r in at_incident} == {"succeeded"}

        out = proc.stdout.read()
        code = proc.wait(timeout=90)
        reader.join(5)
        while not lines.empty():
            seen.append(lines.get_nowait())
        assert code == 0, "".join(seen)
        assert not [line for line in seen if "XDG_RUNTIME_DIR" in line], "".join(seen)
    finally:
        if proc.poll() is None:
            proc.terminate()  # the demo's own cleanup stops its fleet and server
            proc.wait(30)

    summary = json.loads(out)
    nights = summary["nights"]
    assert nights[0]["slot"] == summary["incident_slot"] == incident.isoformat()
    assert nights[0]["acquired"] == 3 and nights[0]["status"] == "double_run"
    for night in nights[1:]:  # every night after the fix: never more than one got the lock
        assert night["acquired"] <= 1, night
    live = [n for n in nights if n["live"]]
    # A night may go by with no run on a loaded machine (the fleet still starting, or the
    # previous night's run still holding the lock): it is then missed or skipped, never doubled.
    for night in live[:-1]:  # every finished night: all three instances tried
        assert len(night["outcomes"]) == 3, night
    for night in live:  # the demo ended between nights: no billing run was cut off
        assert all(outcome in ("succeeded", "skipped") for _, outcome in night["outcomes"]), night
    ran_once = [n for n in live[:-1] if n["acquired"] == 1]
    assert len(ran_once) >= 2, nights
    for night in ran_once:  # finished nights with a run: the other two instances skipped
        assert night["skipped"] == 2 and night["status"] == "ok", night
    counts = summary["instances"]
    # the instances' counts add up to the nights' (a night with no run adds nothing to either)
    assert sum(c["acquired"] for c in counts.values()) == sum(n["acquired"] for n in live)
    kinds = {a["kind"] for a in summary["alerts"]}
    assert {"double_run", "stale_holder", "duplicates"} <= kinds
    assert summary["duplicates"]["groups"] == 120
    # the demo tells its incident: every attempt, the on-call's psql holder and its release,
    # the duplicate keys and the verdict
    story = summary["incident_story"]
    assert sorted(a["instance"] for a in story["attempts"]) == ["web-1", "web-2", "web-3"]
    (oncall,) = story["holders"]
    assert (oncall["application"], oncall["pid"]) == ("psql", 28731)
    assert [a["action"] for a in story["audit"]] == ["release"]
    assert len(story["duplicates"]) == 120 and story["status"] == "double_run"
    assert story["verdict"].startswith("double run: 3 executions on ")
    assert "psql pid 28731" in summary["incident_story_text"]

    deadline = time.monotonic() + DEADLINE
    while (left := _left_behind(state, pids)) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert not left, f"left running after the demo: {left}"
    assert not (state / "lockconsole" / "demo-pgdata" / "postmaster.pid").exists()


def test_night_schedule_fires_evenly() -> None:
    from croniter import croniter

    start = datetime(2026, 11, 29, 2, 0, 1, tzinfo=UTC)
    cron = croniter(night_schedule(20), start)
    fires = [cron.get_next(datetime) for _ in range(4)]
    assert [f.second for f in fires] == [20, 40, 0, 20]
    with pytest.raises(Exception, match="divide a minute"):
        night_schedule(25)


def test_aligned_clock_starts_the_schedule_at_the_first_slot() -> None:
    past = datetime.now(UTC) - timedelta(seconds=3)
    clock = AlignedClock(past)
    assert clock() == past - timedelta(microseconds=1)  # a late start still fires that slot
    assert clock() > past


@pytest.mark.parametrize(
    "args, message",
    [
        (["--night-seconds", "7"], "divide a minute"),
        (["--for", "5"], "with --headless"),
        (["--json"], "--json goes with --headless"),
    ],
)
def test_demo_usage_errors_start_nothing(tmp_path: Path, args: list[str], message: str) -> None:
    result = subprocess.run(
        [PYTHON, "-m", "lockconsole", "demo", *args],
        env=_env(tmp_path),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert result.returncode == 2
    assert message in result.stderr and "Traceback" not in result.stderr
    assert not (tmp_path / "state" / "lockconsole" / "demo-pgdata").exists()


def test_demo_config_keeps_a_mysql_password_off_the_screen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lockconsole.config.loader import load_config
    from lockconsole.demo.scenario import MYSQL_URL_ENV, config_text

    monkeypatch.setenv(MYSQL_URL_ENV, "restored after the test")
    url = "mysql://app:s3cret@db.internal:3306/shop"
    text = config_text("postgresql://postgres@/billing?host=/tmp", 20, url)
    assert "s3cret" not in text and os.environ[MYSQL_URL_ENV] == url
    path = tmp_path / "demo.toml"
    path.write_text(text, encoding="utf-8")
    config = load_config(str(path))
    assert config.databases["shop"].url.password == "s3cret"
    assert config.job("usage_rollup").strategy == "mysql"
    assert config.job("nightly_billing").schedule == "* * * * * */20"


def test_the_demo_fleet_can_be_paused_and_serves_a_request_on_web_2(reachable_tmp: Path) -> None:
    from lockconsole.backends.ledger.store import Ledger
    from lockconsole.config.loader import load_config
    from lockconsole.console.facade import Console

    tmp_path = reachable_tmp  # the demo's embedded PostgreSQL keeps its data here
    # --json: the progress lines ("config: ...", "fleet started: ...") go to stderr
    argv = [PYTHON, "-m", "lockconsole", "demo", "--headless", "--json", "--night-seconds"]
    proc = subprocess.Popen(
        [*argv, str(NIGHT), "--for", "120"],
        env=_env(tmp_path),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        cwd=tmp_path,
    )
    lines: queue.Queue[str] = queue.Queue()
    seen: list[str] = []
    threading.Thread(target=_lines, args=(proc.stderr, lines), daemon=True).start()
    try:
        config = load_config(_wait_for(lines, "config: ", seen, 60).split(": ", 1)[1].strip())
        _wait_for(lines, "fleet started: ", seen, 30)
        job = config.job("nightly_billing")
        with Console(config) as console:
            paused_at = console.pause("nightly_billing", "demo: hold billing").paused_at

            def paused_rows() -> list[str]:
                with Ledger(config.ledger_for(job)) as ledger:
                    runs = ledger.runs("nightly_billing", since=paused_at, limit=50)
                return [r.instance for r in runs if r.outcome == "paused"]

            deadline = time.monotonic() + 60
            while not paused_rows() and time.monotonic() < deadline:
                time.sleep(0.5)
            assert paused_rows(), "a fleet instance found nightly_billing paused"
            assert console.resume("nightly_billing") is not None

            request_id = console.request("nightly_billing", instance="web-2")
            deadline = time.monotonic() + 60
            found = console.request_state("nightly_billing", request_id)
            while found is not None and not found.final and time.monotonic() < deadline:
                time.sleep(0.2)
                found = console.request_state("nightly_billing", request_id)
        assert found is not None and found.served_by == "web-2" and found.run_id is not None
        # succeeded, or skipped when the night's own run held the lock at that instant
        assert found.state in ("succeeded", "skipped"), found
    finally:
        proc.terminate()  # the demo's own cleanup stops its fleet and server
        proc.wait(60)
