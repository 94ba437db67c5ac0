"""Shared bits for tests that run `lockconsole run` in real OS processes."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from lockconsole.backends.ledger.store import Ledger
from lockconsole.config.loader import load_config
from lockconsole.model.jobs import Run

# A job body that leaves a mark per real run, so a test can count runs, not claims.
MARK_AND_SLEEP = (
    "import sys, time; open(sys.argv[1], 'a').write('ran\\n'); time.sleep(float(sys.argv[2]))"
)


def lockconsole(config: Path, *args: str, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "lockconsole", "--config", str(config), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def runs_of(config: Path, job: str) -> list[Run]:
    cfg = load_config(str(config))
    with Ledger(cfg.ledger_for(cfg.job(job))) as ledger:
        return ledger.runs(job)


def pg_job_config(url: str, job: str, strategy: str, **extra: object) -> str:
    lines = [
        "[databases.main]",
        f'url = "{url}"',
        f"[jobs.{job}]",
        'database = "main"',
        f'strategy = "{strategy}"',
        'schedule = "0 2 * * *"',
    ]
    for k, v in extra.items():
        lines.append(f"{k} = {v!r}".replace("'", '"') if isinstance(v, str) else f"{k} = {v}")
    return "\n".join(lines) + "\n"
