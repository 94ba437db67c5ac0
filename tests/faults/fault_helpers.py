"""Shared pieces of the fault suite: configs, the billing worker, invoices, a TCP proxy, and
an embedded PostgreSQL of our own (the only server these tests ever restart)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

from lockconsole.backends.ledger.store import Ledger
from lockconsole.config.loader import load_config
from lockconsole.model.jobs import Run

from tests.support.barrier import Barrier
from tests.support.config import job_toml, write_toml
from tests.support.helpers import (
    wait_for as wait_for,  # re-exported: fault tests import it from here
)
from tests.support.settings import CLOCKSHIM, ROOT

HERE = Path(__file__).resolve().parent
WORKER = HERE / "billing_worker.py"


def job_config(path: Path, url: str, job: str, strategy: str, **extra: Any) -> Path:
    """A one-job lockconsole.toml firing every minute; extra keys go into the job's table."""
    return write_toml(path, job_toml(url, job, strategy=strategy, schedule="* * * * *", **extra))


def worker_env() -> dict[str, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("LOCKCONSOLE_CONFIG", None)
    env.pop("LOCKCONSOLE_INSTANCE", None)
    return env


def start_worker(
    config: Path,
    job: str,
    instance: str,
    table: str,
    *args: str,
    barrier: Barrier | None = None,
    clock_shift: float = 0.0,
) -> subprocess.Popen:
    """The billing worker as a process; with `barrier`, it pauses at the barrier's points (the
    run path's fault points, and the worker's own `charged_<n>`: n tenants charged)."""
    env = worker_env()
    if clock_shift:  # this instance's wall clock runs off (tests/support/clockshim)
        env["PYTHONPATH"] = str(CLOCKSHIM) + os.pathsep + env["PYTHONPATH"]
        env["LOCKCONSOLE_TEST_CLOCK_SHIFT"] = str(clock_shift)
    return subprocess.Popen(
        [sys.executable, str(WORKER), str(config), job, instance, table, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=barrier.env(env) if barrier is not None else env,
    )


def finish(proc: subprocess.Popen, timeout: float = 60) -> tuple[int, dict[str, Any], str]:
    """(exit code, the worker's JSON line or {}, stderr)."""
    out, err = proc.communicate(timeout=timeout)
    lines = [ln for ln in out.splitlines() if ln.startswith("{")]
    return proc.returncode, json.loads(lines[-1]) if lines else {}, err


def runs_of(config: Path, job: str, limit: int = 100_000) -> list[Run]:
    cfg = load_config(str(config))
    with Ledger(cfg.ledger_for(cfg.job(job))) as ledger:
        return sorted(ledger.runs(job, limit=limit), key=lambda r: r.id or 0)


def acquired_run(config: Path, job: str) -> Run | None:
    return next((r for r in runs_of(config, job) if r.outcome == "acquired"), None)


# -- invoices ----------------------------------------------------------------------------------

INVOICES_DDL = {
    "postgresql": "create table {t} (id bigserial primary key, tenant_id int not null, "
    "period text not null, run_id bigint, token bigint, instance text, unique (tenant_id, period))",
    "mysql": "create table {t} (id bigint auto_increment primary key, tenant_id int not null, "
    "period varchar(64) not null, run_id bigint, token bigint, instance varchar(255), "
    "unique key (tenant_id, period))",
}


def create_invoices(conn: Any, dialect: str, table: str) -> None:
    sql = INVOICES_DDL[dialect].format(t=table)
    if dialect == "mysql":
        with conn.cursor() as cur:
            cur.execute(sql)
    else:
        conn.execute(sql)


def invoices(conn: Any, dialect: str, table: str) -> list[tuple[Any, ...]]:
    sql = f"select tenant_id, period, run_id, token, instance from {table} order by id"
    if dialect == "mysql":
        with conn.cursor() as cur:
            cur.execute(sql)
            return list(cur.fetchall())
    return list(conn.execute(sql).fetchall())


def duplicate_invoices(rows: list[tuple[Any, ...]]) -> int:
    counts = Counter((r[0], r[1]) for r in rows)
    return sum(n - 1 for n in counts.values() if n > 1)
