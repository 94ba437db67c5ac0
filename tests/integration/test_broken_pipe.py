"""A reader that goes away (`lockconsole … | head -1`) ends the command quietly: no traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.settings import PG_URL

JOBS = "".join(
    f'[jobs.job{i:03d}]\ndatabase = "main"\nschedule = "* * * * *"\n' for i in range(300)
)


def _closed_pipe_run(args: list[str], cwd: Path) -> subprocess.CompletedProcess[bytes]:
    """Run lockconsole with stdout a pipe whose read end is already closed."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        return subprocess.run(
            [sys.executable, "-m", "lockconsole", *args],
            stdout=write_end,
            stderr=subprocess.PIPE,
            cwd=cwd,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write_end)


@pytest.mark.parametrize(
    "args", [["config", "--json"], ["check", "--json"], ["history"], ["locks"], ["check"]]
)
def test_a_closed_pipe_ends_quietly_with_141(tmp_path: Path, args: list[str]) -> None:
    (tmp_path / "lockconsole.toml").write_text(f'[databases.main]\nurl = "{PG_URL}"\n' + JOBS)
    done = _closed_pipe_run(args, tmp_path)
    assert b"Traceback" not in done.stderr, done.stderr.decode()
    assert b"BrokenPipe" not in done.stderr
    assert done.stderr == b""
    assert done.returncode == 141
