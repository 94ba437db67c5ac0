"""`lockconsole metrics` when a database goes away, on a real PostgreSQL and a real MariaDB
ledger, each reached through a TCP proxy of the test's own that it cuts (or hangs: every
connection to a peer that answers nothing): the series that came from that database are absent
(unknown, never 0), `lockconsole_database_up` and `lockconsole_job_up` say 0, the other
database's series stay, and once it is back the counters go on from where they were; the audit
counters (force-releases, requests) likewise. Scraped over HTTP and parsed with
prometheus_client's own parser. The counters' rules are also checked on snapshots made for
them."""

from __future__ import annotations

import json
import subprocess
import sys
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from lockconsole import run_once
from lockconsole.config.loader import load_config, parse_config
from lockconsole.metrics.counters import Counters
from lockconsole.metrics.figures import slot_statuses
from lockconsole.model.jobs import Outcome, Run
from lockconsole.model.views import SlotReport, SlotStatus, Snapshot

from tests.integration.test_metrics import Samples, parse, value
from tests.support.helpers import wait_for
from tests.support.tcp_proxy import SwitchableProxy, proxied

PER_DATABASE = ("job_last_success_timestamp_seconds", "job_last_attempt_timestamp_seconds")


@pytest.fixture
def proxies(pg_url: str, mysql_url: str) -> Iterator[dict[str, tuple[SwitchableProxy, str]]]:
    found = {
        "pg": proxied(pg_url, 5432, SwitchableProxy),
        "my": proxied(mysql_url, 3306, SwitchableProxy),
    }
    for url in (found["pg"][1], found["my"][1]):
        assert "127.0.0.1:" in url and ":5432/" not in url and ":3306/" not in url
    yield found
    for proxy, _ in found.values():
        proxy.close()


@pytest.fixture
def exporters() -> Iterator[list[subprocess.Popen[str]]]:
    """Exporter processes the test started, killed (by their pid) at the end."""
    started: list[subprocess.Popen[str]] = []
    yield started
    for process in started:
        if process.poll() is None:
            process.kill()
            process.wait()


def start_exporter(path: Path, env: dict[str, str], exporters: list[subprocess.Popen[str]]) -> str:
    """Start `lockconsole metrics --listen` on any port; the URL of its /metrics."""
    process = subprocess.Popen(
        [sys.executable, "-m", "lockconsole", "--config", str(path), "metrics"]
        + ["--listen", "127.0.0.1:0"],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    exporters.append(process)
    assert process.stderr is not None
    line = process.stderr.readline()
    assert line.startswith("serving metrics on http://127.0.0.1:"), line
    return line.split(" on ", 1)[1].strip()


def _scrape(url: str) -> Samples:
    with urllib.request.urlopen(url, timeout=60) as answer:
        assert answer.status == 200
        return parse(answer.read().decode())


def _series_of(samples: Samples, job: str) -> set[str]:
    return {name for name, labels in samples if ("job_name", job) in labels}


@pytest.mark.parametrize("cut", ["pg", "my"])
def test_a_database_cut_is_unknown_and_the_counters_go_on_after_it(
    cut: str, proxies, uid: str, write_config, cli_env, exporters
) -> None:
    jobs = {"pg": f"o_pg_{uid}", "my": f"o_my_{uid}"}
    # the proxy is a plain TCP hop, not a pooler: pg-session may run through it
    strategy = {"pg": 'strategy = "pg-session"\nallow_pooler = true', "my": 'strategy = "mysql"'}
    lines = ['[console]\ngrace = "1s"']
    for name, (_proxy, url) in proxies.items():
        lines.append(f"[databases.{name}]\nurl = {json.dumps(url)}")
    for name, job in jobs.items():
        lines.append(f'[jobs.{job}]\ndatabase = "{name}"\n{strategy[name]}\nschedule = "0 2 * * *"')
    path = write_config("\n".join(lines) + "\n")
    config = load_config(str(path))
    for job in jobs.values():  # the slot succeeds once on web-1
        with run_once(job, config=config, instance="web-1") as first:
            assert first.acquired
    url = start_exporter(path, cli_env, exporters)

    scraped = _scrape(url)  # the rows already there are taken as counted: every counter at 0
    for job in jobs.values():
        assert value(scraped, "job_up", job_name=job) == 1
        assert value(scraped, "job_slots", job_name=job, status="ok") == 1
        for status in slot_statuses():
            assert value(scraped, "slots_total", job_name=job, status=status) == 0
        assert (
            value(
                scraped, "attempts_total", job_name=job, outcome="succeeded", instance_name="web-1"
            )
            == 0
        )
    for job in jobs.values():  # web-2 finds the slot done: a skipped attempt, counted
        with run_once(job, config=config, instance="web-2") as second:
            assert not second.acquired
    skipped = {"outcome": "skipped", "instance_name": "web-2"}
    # a new instance's series is exported at 0 for one scrape, then counted
    new = _scrape(url)
    assert all(value(new, "attempts_total", job_name=j, **skipped) == 0 for j in jobs.values())
    before = _scrape(url)
    assert all(value(before, "attempts_total", job_name=j, **skipped) == 1 for j in jobs.values())

    other = "my" if cut == "pg" else "pg"
    proxies[cut][0].cut()

    def scraped_down() -> Samples | None:
        samples = _scrape(url)
        return samples if value(samples, "database_up", database=cut) == 0 else None

    down = wait_for(scraped_down, what=f"database_up 0 for {cut}")
    assert value(down, "job_up", job_name=jobs[cut]) == 0
    assert value(down, "database_holders", database=cut) is None
    # every series that came from the cut database is gone, none is 0
    assert _series_of(down, jobs[cut]) == {"lockconsole_job_up", "lockconsole_job_period_seconds",
                                           "lockconsole_job_grace_seconds"}  # fmt: skip
    # the other database is read as before
    assert value(down, "database_up", database=other) == 1
    assert value(down, "job_up", job_name=jobs[other]) == 1
    kept = {k: v for k, v in before.items() if ("job_name", jobs[other]) in k[1]}
    for (name, labels), was in kept.items():
        if name.endswith("_total") or name.endswith("_slots"):
            assert down[name, labels] == was, name
    for name in PER_DATABASE:
        assert value(down, name, job_name=jobs[other]) == value(before, name, job_name=jobs[other])

    proxies[cut][0].restore()
    wait_for(
        lambda: value(_scrape(url), "database_up", database=cut) == 1, what=f"{cut} read again"
    )
    with run_once(jobs[cut], config=config, instance="web-2") as third:
        assert not third.acquired
    after = _scrape(url)
    assert value(after, "job_up", job_name=jobs[cut]) == 1
    # the counter goes on from its value before the outage: monotonic, the new attempt counted
    assert value(after, "attempts_total", job_name=jobs[cut], **skipped) == 2
    assert value(after, "attempts_total", job_name=jobs[other], **skipped) == 1
    for (name, labels), was in before.items():
        if name.endswith("_total"):
            assert after[name, labels] >= was, (name, labels)


# -- the counters' rules, on snapshots made for them (pure: no database involved) -------------

T0 = datetime(2026, 12, 1, 2, 0, tzinfo=UTC)


def _run(job: str, instance: str, outcome: Outcome, run_id: int, slot: datetime = T0) -> Run:
    return Run(job, slot, instance, "h", 1, "scheduled", outcome, slot, id=run_id)


def _report(job: str, status: SlotStatus, slot: datetime = T0) -> SlotReport:
    return SlotReport(job, slot, 1, 0, (), status)


def test_counters_count_each_final_row_once_and_each_status_a_slot_reaches() -> None:
    config = parse_config(
        '[databases.main]\nurl = "postgresql://u@h/d"\n[jobs.a]\nkey = 1\n[jobs.b]\nkey = 2\n'
    )
    counters = Counters(config)
    now = T0 + timedelta(minutes=5)
    baseline = Snapshot(
        taken_at=now, runs=(_run("a", "web-1", "succeeded", 1),), slots=(_report("a", "ok"),)
    )
    counters.advance(baseline, {"a", "b"})
    assert counters.slots["a", "ok"] == 0 and counters.attempts["a", "succeeded", "web-1"] == 0
    # a second success lands in the slot (now a double run), and one attempt is still running
    later = Snapshot(
        taken_at=now,
        runs=(
            _run("a", "web-1", "succeeded", 1),
            _run("a", "web-1", "succeeded", 2),
            _run("a", "web-2", "acquired", 3),
        ),
        slots=(_report("a", "double_run"),),
    )
    for _ in range(3):  # seen again and again: counted once
        counters.advance(later, {"a", "b"})
    assert counters.slots["a", "double_run"] == 1 and counters.slots["a", "ok"] == 0
    assert counters.attempts["a", "succeeded", "web-1"] == 1
    assert not any(v for k, v in counters.attempts.items() if k[2] == "web-2")  # running
    done = Snapshot(
        taken_at=now,
        runs=(*later.runs[:2], _run("a", "web-2", "failed", 3)),
        slots=(_report("a", "double_run"),),
    )
    counters.advance(done, {"a", "b"})  # web-2 is new: its series at 0 first
    assert counters.attempts["a", "failed", "web-2"] == 0
    counters.advance(done, {"b"})  # a's database unread: a is not advanced, only the pending
    assert counters.attempts["a", "failed", "web-2"] == 1
    names = {labels[0] for f in counters.figures({"b"}) for labels, _ in f.samples}
    assert names == {"b"}  # an unknown job's counter series are left out
    # within its grace a failed slot is not final yet: the next instance may retry it
    fresh = T0 + timedelta(hours=1)
    failing = Snapshot(taken_at=fresh, slots=(_report("b", "failed", fresh),))
    counters.advance(failing, {"b"})
    assert counters.slots["b", "failed"] == 0
    retried = Snapshot(taken_at=fresh, slots=(_report("b", "retried", fresh),))
    counters.advance(retried, {"b"})
    settled = fresh + config.console.grace
    counters.advance(Snapshot(taken_at=settled, slots=retried.slots), {"b"})
    assert counters.slots["b", "retried"] == 1 and counters.slots["b", "failed"] == 0
    # a job's newest attempt is in every snapshot, however old: older than the lookback, it
    # is never counted, scrape after scrape
    old = _run("b", "web-9", "failed", 99, T0 - config.console.lookback - timedelta(days=1))
    for _ in range(3):
        counters.advance(Snapshot(taken_at=settled, runs=(old,)), {"b"})
    assert not any(v for k, v in counters.attempts.items() if k[2] == "web-9")
    gone = Snapshot(taken_at=now + config.console.lookback + timedelta(days=1))
    counters.advance(gone, {"a", "b"})  # older than the lookback: forgotten, counts kept
    assert counters.attempts["a", "failed", "web-2"] == 1
    assert counters._runs["a"] == {} and counters._slots["a"] == {}


def test_force_releases_and_requests_are_counted_and_unknown_while_their_table_is_cut(
    pg_url: str, proxies, uid: str, write_config, cli_env, exporters
) -> None:
    import psycopg

    from lockconsole.console.facade import Console

    jobs = {"pg": f"a_pg_{uid}", "my": f"a_my_{uid}"}
    lines = [f"[databases.{n}]\nurl = {json.dumps(u)}" for n, (_p, u) in proxies.items()]
    lines += [f'[jobs.{jobs["pg"]}]\ndatabase = "pg"\nallow_pooler = true']
    lines += [f'[jobs.{jobs["my"]}]\ndatabase = "my"\nstrategy = "mysql"']
    path = write_config("\n".join(lines) + "\n")
    config = load_config(str(path))
    with Console(config) as console:  # the audit tables exist before the exporter's first read
        console.audit()
        console.request(jobs["my"])  # there before the exporter started: not counted
    url = start_exporter(path, cli_env, exporters)
    first = _scrape(url)
    assert value(first, "force_releases_total", database="pg") == 0
    assert value(first, "requests_total", job_name=jobs["my"]) == 0

    holder = psycopg.connect(pg_url, autocommit=True)  # a real session on the job's key
    holder.execute("SELECT pg_advisory_lock(%s)", (config.job(jobs["pg"]).key.int64(),))
    with Console(config) as console:
        (held,) = wait_for(lambda: console.find_holders(job=jobs["pg"]), what="the holder")
        assert console.release(held).status == "released"
        console.request(jobs["my"])
        console.request(jobs["pg"])
    holder.close()
    counted = _scrape(url)
    assert value(counted, "force_releases_total", database="pg") == 1
    assert value(counted, "force_releases_total", database="my") == 0
    assert value(counted, "requests_total", job_name=jobs["my"]) == 1
    assert value(counted, "requests_total", job_name=jobs["pg"]) == 1

    proxies["pg"][0].cut()
    down = wait_for(
        lambda: (s := _scrape(url)) and value(s, "database_up", database="pg") == 0 and s,
        what="pg down",
    )
    assert value(down, "force_releases_total", database="pg") is None  # unknown, not 0
    assert value(down, "requests_total", job_name=jobs["pg"]) is None
    assert value(down, "requests_total", job_name=jobs["my"]) == 1
    proxies["pg"][0].restore()
    back = wait_for(
        lambda: (
            (s := _scrape(url))
            and value(s, "force_releases_total", database="pg") is not None
            and s
        ),
        what="pg's audit table read again",
    )
    assert value(back, "force_releases_total", database="pg") == 1  # monotonic, counted once


@pytest.mark.parametrize("hung", ["my", "pg"])
def test_a_hung_database_is_unknown_within_the_budget_and_hides_no_other(
    hung: str, proxies, uid: str, write_config, cli_env, exporters
) -> None:
    jobs = {"pg": f"h_pg_{uid}", "my": f"h_my_{uid}"}
    lines = ['[console]\nstatement_timeout = "1s"\nconnect_timeout = "1s"']
    lines += [f"[databases.{n}]\nurl = {json.dumps(u)}" for n, (_p, u) in proxies.items()]
    lines += [f'[jobs.{jobs["pg"]}]\ndatabase = "pg"\nallow_pooler = true']
    lines += [f'[jobs.{jobs["my"]}]\ndatabase = "my"\nstrategy = "mysql"']
    path = write_config("\n".join(lines) + "\n")
    config = load_config(str(path))
    for job in jobs.values():
        with run_once(job, config=config, instance="web-1") as done:
            assert done.acquired
    url = start_exporter(path, cli_env, exporters)
    before = _scrape(url)
    assert value(before, "job_up", job_name=jobs[hung]) == 1
    other = "pg" if hung == "my" else "my"
    # every connection to the database, kept or new, now reaches a peer that takes every byte
    # and answers nothing (a hung server, sidecar or NAT box): the scrape gives up on it
    # within the console's budget and still answers
    proxies[hung][0].hang()
    seen = _scrape(url)
    assert value(seen, "database_up", database=hung) == 0
    assert value(seen, "job_up", job_name=jobs[hung]) == 0
    assert _series_of(seen, jobs[hung]) == {"lockconsole_job_up"}  # no schedule: no period
    assert value(seen, "job_up", job_name=jobs[other]) == 1  # the other is read as before
    for name in PER_DATABASE:
        assert value(seen, name, job_name=jobs[other]) == value(before, name, job_name=jobs[other])
    assert value(seen, "attempts_total", job_name=jobs[other], outcome="succeeded",
                 instance_name="web-1") == 0  # fmt: skip
