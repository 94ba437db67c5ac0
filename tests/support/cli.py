"""The one way the tests run the `lockconsole` command and wait for it: `run_cli`.

`python -m lockconsole [--config CONFIG] WORDS...` in a subprocess, stdin closed unless `input`
is given, with the environment the test hands in (the `cli_env` fixture: the checkout on
PYTHONPATH, no LOCKCONSOLE_CONFIG, a private XDG_CONFIG_HOME, NO_COLOR). A test that needs the
process while it runs (to signal it, to pause it at a fault point) starts it with
tests.support.runner_helpers.lockconsole instead.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import NamedTuple


class CliResult(NamedTuple):
    """What the command did: its exit code, stdout and stderr (named as subprocess names
    them, and unpacked as `code, out, err = run_cli(...)`)."""

    returncode: int
    stdout: str
    stderr: str


def run_cli(
    config: Path | str | None,
    *words: str,
    env: Mapping[str, str],
    timeout: float = 120,
    input: str | None = None,
    cwd: Path | None = None,
) -> CliResult:
    """`lockconsole --config CONFIG WORDS...` (no --config when `config` is None), waited for
    at most `timeout` seconds."""
    argv = [sys.executable, "-m", "lockconsole"]
    if config is not None:
        argv += ["--config", str(config)]
    done = subprocess.run(
        [*argv, *words],
        env=dict(env),
        cwd=cwd,
        input=input,
        stdin=None if input is not None else subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    return CliResult(done.returncode, done.stdout, done.stderr)
