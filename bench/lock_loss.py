"""Lock-loss detection: from pg_terminate_backend / KILL of the lock's session to the job's SIGTERM.

A real `lockconsole run JOB -- python -c ...` holds a pg-session or mysql lock with the default
5 s watchdog interval; its job writes a file once it runs and records the instant it gets
SIGTERM. The bench ends the lock's session from another connection and takes the time between
the terminate (or KILL) and the job's SIGTERM: the runner notices the closed socket and runs
its check at once, instead of waiting for the next periodic check (up to the 5 s interval).
Median of ROUNDS rounds per strategy; target: at most 100 ms.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from .common import Row, main, median, mysql_url, pg_url, progress, raw_mysql, raw_pg, uid

ROUNDS = int(os.environ.get("LOCKCONSOLE_BENCH_LOSS_ROUNDS", 10))
LIMIT = 0.100  # seconds
JOB = """
import pathlib, signal, sys, time
folder = pathlib.Path(sys.argv[1])
def stop(signum, frame):
    (folder / "term").write_text(repr(time.time()))
    sys.exit(0)
signal.signal(signal.SIGTERM, stop)
(folder / "ready").write_text("1")
time.sleep(60)
"""


def _config(folder: Path, strategy: str, u: str) -> Path:
    url = mysql_url() if strategy == "mysql" else pg_url()
    key = f'"loss_{u}"' if strategy == "mysql" else str(7_300_000 + int(u[:6], 16))
    text = (
        f'[databases.main]\nurl = "{url}"\n[jobs.loss_{u}]\ndatabase = "main"\n'
        f'strategy = "{strategy}"\nkey = {key}\nonce_per_slot = false\n'
    )
    path = folder / "lockconsole.toml"
    path.write_text(text, encoding="utf-8")
    return path


def _session(strategy: str, conn: Any, job: str) -> int | None:
    sql = "SELECT session_id FROM lockconsole_runs WHERE job = %s AND outcome = 'acquired'"
    if strategy == "mysql":
        with conn.cursor() as cur:
            cur.execute(sql, (job,))
            row = cur.fetchone()
    else:
        row = conn.execute(sql, (job,)).fetchone()
    return None if row is None else int(row[0])


def _end_session(strategy: str, conn: Any, pid: int) -> None:
    if strategy == "mysql":
        with conn.cursor() as cur:
            cur.execute(f"KILL {int(pid)}")
    else:
        conn.execute("SELECT pg_terminate_backend(%s)", (pid,))


def one_round(strategy: str, conn: Any) -> float:
    u = uid()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        config = _config(folder, strategy, u)
        env = dict(os.environ, LOCKCONSOLE_CONFIG=str(config))
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "lockconsole",
                "run",
                f"loss_{u}",
                "-q",
                "--",
                sys.executable,
                "-c",
                JOB,
                str(folder),
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            deadline = time.monotonic() + 60
            while not (folder / "ready").exists():
                if proc.poll() is not None or time.monotonic() > deadline:
                    raise RuntimeError(f"{strategy}: the job did not start")
                time.sleep(0.005)
            pid = _session(strategy, conn, f"loss_{u}")
            if pid is None:
                raise RuntimeError(f"{strategy}: no acquired run in the ledger")
            ended = time.time()
            _end_session(strategy, conn, pid)
            while not (folder / "term").exists() or not (folder / "term").read_text():
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{strategy}: the job got no SIGTERM")
                time.sleep(0.001)
            return float((folder / "term").read_text()) - ended
        finally:
            proc.wait(timeout=60)


def run() -> list[Row]:
    rows = []
    for strategy in ("pg-session", "mysql"):
        conn = raw_mysql() if strategy == "mysql" else raw_pg()
        try:
            progress(f"lock loss {strategy}: {ROUNDS} rounds")
            samples = [one_round(strategy, conn) for _ in range(ROUNDS)]
        finally:
            conn.close()
        note = (
            f"terminate/KILL -> job SIGTERM, median of {ROUNDS}, worst "
            f"{max(samples) * 1e3:.0f} ms; watchdog_interval 5 s (the periodic check alone "
            "noticed after up to 5 s)"
        )
        rows.append(
            Row(
                f"lock loss detected ({strategy})",
                median(samples),
                None,
                "s",
                limit=LIMIT,
                note=note,
            )
        )
    return rows


if __name__ == "__main__":
    main(run)
