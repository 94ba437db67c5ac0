"""Runner cold start: `lockconsole run JOB -- true` against a one-line psycopg script.

Both sides are fresh Python processes, run interleaved: lockconsole loads its config, tries
the lock, records the attempt, runs `true`, records the end; the raw side imports psycopg,
connects and takes an advisory lock. Also printed: the import time of each top-level module
of the run path (`python -X importtime`), and which of textual, rich and sqlalchemy are in
sys.modules after a run (the run path should load none of them).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

from .common import Row, interleave, main, median, pg_url, progress, raw_pg, timed, uid

ROUNDS = int(os.environ.get("LOCKCONSOLE_BENCH_COLD_ROUNDS", 15))
TARGET = 1.2
HEAVY = ("textual", "rich", "sqlalchemy")
RAW = "import psycopg; psycopg.connect({url!r}).execute('select pg_try_advisory_lock(1)')"
IN_PROCESS = """
import json, sys
from lockconsole.cli.main import main
code = main(sys.argv[1:])
print(json.dumps({"exit": code, "heavy": [m for m in %r if m in sys.modules]}))
"""


def _write_config(folder: Path, job: str) -> Path:
    path = folder / "lockconsole.toml"
    path.write_text(
        f'[databases.main]\nurl = "{pg_url()}"\n[jobs.{job}]\nstrategy = "pg-session"\n'
        'schedule = "*/5 * * * *"\nonce_per_slot = false\n',
        encoding="utf-8",
    )
    return path


def _import_times(argv: list[str], env: dict[str, str], runs: int = 3) -> list[tuple[str, float]]:
    """Median cumulative import time (ms) of each top-level module (`python -X importtime`)."""
    found: dict[str, list[float]] = {}
    for _ in range(runs):
        proc = subprocess.run(
            [sys.executable, "-X", "importtime", *argv],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        once: dict[str, float] = {}
        for line in proc.stderr.splitlines():
            m = re.match(r"import time:\s+\d+ \|\s+(\d+) \| ( *)(\S+)", line)
            if m and not m.group(2):  # no indent: imported by the program itself
                top = m.group(3).split(".")[0]
                once[top] = once.get(top, 0.0) + int(m.group(1)) / 1000
        for name, ms in once.items():
            found.setdefault(name, []).append(ms)
    return sorted(((k, median(v)) for k, v in found.items()), key=lambda kv: -kv[1])


def _compile_bytecode() -> None:
    """Compile lockconsole's modules, as installing it does (psycopg's came compiled with it).

    Without this, under PYTHONDONTWRITEBYTECODE each lockconsole run would compile its own
    modules from source while the raw side loads psycopg's compiled ones.
    """
    import compileall

    import lockconsole

    compileall.compile_dir(str(Path(lockconsole.__file__).parent), quiet=1)


def run() -> list[Row]:
    _compile_bytecode()
    job = f"bench_cold_{uid()}"
    env = dict(os.environ, LOCKCONSOLE_INSTANCE="bench-cold")
    with tempfile.TemporaryDirectory() as tmp:
        cfg = _write_config(Path(tmp), job)
        lc_argv = ["-m", "lockconsole", "--config", str(cfg), "run", job, "-q", "--", "true"]
        raw_argv = ["-c", RAW.format(url=pg_url())]

        def side(argv: list[str]) -> float:
            def go() -> None:
                proc = subprocess.run(
                    [sys.executable, *argv], env=env, capture_output=True, text=True, check=False
                )
                if proc.returncode != 0:
                    raise RuntimeError(f"{argv[:3]} exited {proc.returncode}: {proc.stderr}")

            return timed(go)

        sides = {"lockconsole": lambda: side(lc_argv), "raw": lambda: side(raw_argv)}
        for fn in sides.values():  # warm the page cache and the ledger table
            fn()
        progress(f"cold start: {ROUNDS} runs per side")
        samples = {k: median(v) for k, v in interleave(sides, ROUNDS).items()}

        lc_imports = _import_times(lc_argv, env)
        raw_imports = _import_times(raw_argv, env)
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                IN_PROCESS % (HEAVY,),
                "--config",
                str(cfg),
                "run",
                job,
                "-q",
                "--",
                "true",
            ],
            env=env,
            capture_output=True,
            text=True,
            check=False,
        )
        try:
            heavy = json.loads(proc.stdout.strip().splitlines()[-1])["heavy"]
        except (IndexError, ValueError, KeyError):
            heavy = [f"could not tell: {proc.stderr.strip()[-200:]}"]
    with raw_pg() as conn:
        conn.execute("DELETE FROM lockconsole_runs WHERE job = %s", (job,))

    top = ", ".join(f"{name} {ms:.0f} ms" for name, ms in lc_imports[:8])
    raw_top = ", ".join(f"{name} {ms:.0f} ms" for name, ms in raw_imports[:3])
    print(f"cold start imports, lockconsole run: {top}", file=sys.stderr)
    print(f"cold start imports, raw script: {raw_top}", file=sys.stderr)
    loaded = ", ".join(heavy) if heavy else "none"
    return [
        Row(
            "runner cold start",
            samples["lockconsole"],
            samples["raw"],
            "s",
            TARGET,
            note=f"imports (cumulative): {top}; raw: {raw_top}",
        ),
        Row(
            "runner cold start: textual/rich/sqlalchemy loaded",
            len(heavy),
            0,
            "modules",
            status="ok" if not heavy else "MISS",
            note=f"in sys.modules after a run: {loaded}",
        ),
    ]


if __name__ == "__main__":
    main(run)
