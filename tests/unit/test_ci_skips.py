"""Under CI=true a skip outside the conftest's allow-list fails the run; an allowed one stays."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.support.settings import PYTHON, ROOT

CASES = """
import pytest

def test_missing_client():
    pytest.skip("no such client on this machine")

@pytest.mark.parametrize("dialect", ["sqlite"])
def test_a_dropped_connection_is_reopened_once(dialect):
    pytest.skip("SQLite has no server connection to kill")
"""


def run_cases(tmp_path: Path, ci: str) -> subprocess.CompletedProcess[str]:
    folder = tmp_path / "tests" / "integration"  # the allow-list names this file's cases
    folder.mkdir(parents=True)
    (folder / "test_lease.py").write_text(CASES)
    env = {**os.environ, "CI": ci, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [
            PYTHON,
            "-m",
            "pytest",
            "-p",
            "tests.conftest",
            "-p",
            "no:cacheprovider",
            "-q",
            "-rA",
            "--rootdir",
            str(tmp_path),
            "-c",
            os.devnull,
            "tests/integration/test_lease.py",
        ],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )


def test_a_skip_fails_under_ci_unless_allowed(tmp_path: Path) -> None:
    done = run_cases(tmp_path, "true")
    assert done.returncode == 1, done.stdout
    assert "FAILED tests/integration/test_lease.py::test_missing_client" in done.stdout, done.stdout
    assert "skipped under CI=true, which is not allowed here: no such client" in done.stdout
    assert "1 failed, 1 skipped" in done.stdout, done.stdout


def test_outside_ci_a_skip_is_a_skip(tmp_path: Path) -> None:
    done = run_cases(tmp_path, "")
    assert done.returncode == 0 and "2 skipped" in done.stdout, done.stdout


def test_the_suite_prints_its_slowest_tests() -> None:
    """pytest's own options (pyproject.toml) ask for the 25 slowest tests in every run."""
    import shlex
    import tomllib

    options = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    addopts = shlex.split(options["tool"]["pytest"]["ini_options"]["addopts"])
    assert "--durations=25" in addopts, addopts
