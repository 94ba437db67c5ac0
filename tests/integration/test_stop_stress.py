"""Stress: 200 `lockconsole schedule` processes with a per-second job, each sent SIGTERM at a
random instant of its first 2 s of scheduling (counted from its "scheduler started" line, so
the signal lands while it connects, takes the lock, starts or runs the job, or records; not
during Python's start-up). Every one exits within stop_grace + 2 s and leaves no attempt
"acquired". Runs with LOCKCONSOLE_STRESS=1 (about 1-3 minutes on 2 cores); prints the slowest
exit. LOCKCONSOLE_STRESS_RUNS and LOCKCONSOLE_STRESS_PARALLEL change its size."""

from __future__ import annotations

import os
import random
import signal
import time
from concurrent.futures import ThreadPoolExecutor

import pytest

from lockconsole.backends.ledger.store import Ledger
from lockconsole.config.loader import load_config

from tests.support.runner_helpers import lockconsole

RUNS = int(os.environ.get("LOCKCONSOLE_STRESS_RUNS", "200"))
PARALLEL = int(os.environ.get("LOCKCONSOLE_STRESS_PARALLEL", "6"))
GRACE = 2.0
BOUND = GRACE + 2.0

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not os.environ.get("LOCKCONSOLE_STRESS"), reason="set LOCKCONSOLE_STRESS=1"),
]


def test_sigterm_at_random_instants(pg_url, uid, write_config, cli_env, tmp_path):
    rng = random.Random(uid)
    jobs = [f"stress_{uid}_{i}" for i in range(PARALLEL)]
    lines = [f'[databases.main]\nurl = "{pg_url}"']
    for i, job in enumerate(jobs):
        lines.append(
            f'[jobs.{job}]\ndatabase = "main"\nstrategy = "pg-session"\n'
            f'schedule = "* * * * * *"\nstop_grace = {GRACE}\nkey = {int(uid[:8], 16) + i}\n'
            f'command = ["sh", "-c", "trap \\"\\" TERM; sleep 30"]'
        )
    config = write_config("\n".join(lines) + "\n")
    offsets = [rng.uniform(0.0, 2.0) for _ in range(RUNS)]

    def one(index: int) -> tuple[int, float, int, str]:
        job = jobs[index % PARALLEL]
        proc = lockconsole(config, "schedule", "--job", job, "--instance", f"s{index}", env=cli_env)
        assert proc.stderr is not None
        for line in proc.stderr:
            if "scheduler started" in line:
                break
        time.sleep(offsets[index])
        sent = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        try:
            code = proc.wait(timeout=60)
        finally:
            if proc.poll() is None:
                proc.kill()
        took = time.monotonic() - sent
        return index, took, code, proc.communicate()[1]

    started = time.monotonic()
    with ThreadPoolExecutor(PARALLEL) as pool:
        results = list(pool.map(one, range(RUNS)))
    wall = time.monotonic() - started
    slow = sorted(results, key=lambda r: r[1])[-1]
    cfg = load_config(str(config))
    with Ledger(cfg.ledger_for(cfg.job(jobs[0]))) as ledger:
        runs = [r for job in jobs for r in ledger.runs(job, limit=1000)]
    outcomes = sorted({r.outcome for r in runs})
    print(
        f"\nstress: {RUNS} runs, {PARALLEL} at a time, {wall:.1f} s; slowest exit "
        f"{slow[1]:.2f} s after SIGTERM (run {slow[0]}, offset {offsets[slow[0]]:.2f} s); "
        f"{len(runs)} attempts recorded, outcomes {outcomes}"
    )
    if os.environ.get("LOCKCONSOLE_STRESS_SHOW"):
        for i, t, c, e in results:
            if t > float(os.environ.get("LOCKCONSOLE_STRESS_SHOW", "3")):
                print(i, round(offsets[i], 2), round(t, 2), c, e)
    late = [(i, round(t, 2)) for i, t, _, _ in results if t > BOUND]
    assert late == [], f"runs that exited later than {BOUND} s after SIGTERM: {late}"
    bad = [(i, c, e[-400:]) for i, _, c, e in results if c != 0]
    assert bad == [], bad
    assert not any("Traceback" in e for _, _, _, e in results)
    assert [r for r in runs if r.outcome == "acquired"] == [], "no attempt is left acquired"
