"""One clock, the database's: instances with skewed wall clocks on a real PostgreSQL ledger.

Each lockconsole process here has its clock shifted by the clock shim (tests/support/clockshim), the
database server and the test keep the real time. The ledger's times and every comparison with
them are the server's: a fast instance neither expires the fleet's queued requests nor runs a job
paused `--until` a time its clock has passed; its attempts sit in the ledger in real order; and
`check` and the metrics name its offset."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psycopg
import pytest

from lockconsole.backends.ledger import clock

from tests.support.cli import CliResult, run_cli
from tests.support.settings import CLOCKSHIM


def lockconsole(config: Path, env: dict[str, str], *words: str, shift: float = 0.0) -> CliResult:
    """`lockconsole WORDS` with the process's clock `shift` seconds off (0: the real clock)."""
    if shift:
        env = dict(env, PYTHONPATH=f"{CLOCKSHIM}:{env['PYTHONPATH']}")
        env["LOCKCONSOLE_TEST_CLOCK_SHIFT"] = str(shift)
    return run_cli(config, *words, env=env)


@pytest.fixture
def fleet(own_database, write_config):
    config = write_config(
        f'[databases.main]\nurl = "{own_database}"\n'
        '[jobs.billing]\nstrategy = "pg-session"\ncommand = ["true"]\n'
        '[jobs.reports]\nstrategy = "pg-session"\ncommand = ["true"]\nschedule = "0 3 * * *"\n'
    )
    return config, own_database


def server_now(url: str) -> datetime:
    with psycopg.connect(url) as conn:
        row = conn.execute("select clock_timestamp()").fetchone()
        assert row is not None
        return row[0].astimezone(UTC)


def test_a_fast_instance_stamps_the_servers_time_and_is_named(fleet, cli_env) -> None:
    config, url = fleet
    ran = lockconsole(
        config, dict(cli_env, LOCKCONSOLE_INSTANCE="fast"), "run", "billing", "--json", shift=300
    )
    assert ran.returncode == 0, ran.stderr
    later = lockconsole(
        config, dict(cli_env, LOCKCONSOLE_INSTANCE="true"), "run", "billing", "--manual", "--json"
    )
    assert later.returncode == 0, later.stderr
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "select instance, started_at, finished_at, clock_offset_ms "
            "from lockconsole_runs order by id"
        ).fetchall()
    now = server_now(url)
    (fast, fast_start, fast_end, fast_offset), (true, true_start, _, true_offset) = rows
    assert (fast, true) == ("fast", "true")
    # the server's clock, not the instance's five minutes ahead: the ledger's order is the real one
    assert abs((now - fast_start).total_seconds()) < 30 and fast_start <= fast_end <= true_start
    assert abs(fast_offset - 300_000) < 2_000 and abs(true_offset) < 2_000
    check = lockconsole(config, cli_env, "check", "--json", "--no-duplicates")
    skews = [a for a in json.loads(check.stdout)["alerts"] if a["kind"] == "clock_skew"]
    assert len(skews) == 1 and "fast's clock is 300" in skews[0]["message"], check.stdout
    assert "ahead" in skews[0]["message"] and check.returncode == 1
    prom = config.parent / "lockconsole.prom"
    exported = lockconsole(config, cli_env, "metrics", "--textfile", str(prom))
    assert exported.returncode == 0, exported.stderr
    offsets = dict(
        re.findall(
            r'instance_clock_offset_seconds\{instance_name="(\w+)"\} (\S+)', prom.read_text()
        )
    )
    assert abs(float(offsets["fast"]) - 300) < 2 and abs(float(offsets["true"])) < 2, offsets


def test_a_fast_instance_expires_no_request_it_does_not_serve(fleet, cli_env) -> None:
    """Five requests for billing, queued for 60 s; an instance 90 s ahead serves only reports.
    Its expiry sweep covers every job of the ledger: on its own clock all five had expired."""
    config, url = fleet
    for _ in range(5):
        queued = lockconsole(config, cli_env, "request", "billing", "--no-wait", "--timeout", "60s")
        assert queued.returncode == 0, queued.stderr
    fast = dict(cli_env, LOCKCONSOLE_INSTANCE="fast")
    served = lockconsole(config, fast, "schedule", "--job", "reports", "--for", "3", shift=90)
    assert served.returncode == 0, served.stderr
    with psycopg.connect(url) as conn:
        states = [r[0] for r in conn.execute("select state from lockconsole_requests order by id")]
    assert states == ["queued"] * 5


def test_a_fast_instance_does_not_run_a_job_still_paused(fleet, cli_env) -> None:
    """Paused --until 5 minutes from now (the server's now); an instance 6 minutes ahead skips."""
    config, url = fleet
    paused = lockconsole(config, cli_env, "pause", "billing", "--note", "db move", "--until", "5m")
    assert paused.returncode == 0, paused.stderr
    # the pause's own times are the server's too, even when a skewed operator set it
    also = lockconsole(
        config, cli_env, "pause", "reports", "--note", "x", "--until", "5m", shift=-3600
    )
    assert also.returncode == 0, also.stderr
    with psycopg.connect(url) as conn:
        until: dict[str, Any] = dict(
            conn.execute("select job, paused_until from lockconsole_controls").fetchall()
        )
    now = server_now(url)
    for job in ("billing", "reports"):
        assert 240 < (until[job] - now).total_seconds() <= 300, (job, until[job], now)
    fast = lockconsole(
        config, dict(cli_env, LOCKCONSOLE_INSTANCE="fast"), "run", "billing", "--json", shift=360
    )
    assert fast.returncode == 3, fast.stderr
    assert json.loads(fast.stdout)["outcome"] == "paused"


def test_a_reading_is_carried_by_the_monotonic_clock(own_database) -> None:
    """In process: Ledger.now() follows the server's clock, and the offset is measured."""
    from lockconsole.backends.ledger.store import Ledger
    from lockconsole.config.urls import parse_url
    from lockconsole.model.jobs import Database

    clock.forget()
    with Ledger(Database("main", parse_url(own_database))) as ledger:
        first = ledger.now()
        reading = clock.reading(ledger)
        again = ledger.now()
    assert first <= again and abs((server_now(own_database) - again).total_seconds()) < 5
    assert abs(reading.offset) < 2  # this process's clock is the real one
