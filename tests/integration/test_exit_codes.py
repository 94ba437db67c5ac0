"""One table of exit codes for every command, under every fault (README: Exit codes).

Each command runs as a real process, on PostgreSQL and on MariaDB, against a database that is
down (nothing listens), one that is hung (a listener of the test's own accepts the connection
and never answers), a bad configuration, and a missing extra (its package made unimportable for
that process only). A database not read is 5, never 0 or 1; bad input is 2; every failure is
said without a traceback.
"""

from __future__ import annotations

import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.cli import CliResult, run_cli

COMMANDS = {
    "locks": ["locks"],
    "history": ["history"],
    "check": ["check", "--no-duplicates"],
    "audit": ["audit"],
    "run": ["run", "j"],
    "pause": ["pause", "j", "--note", "x"],
    "resume": ["resume", "j"],
    "output": ["output", "1"],
    "request": ["request", "j"],
    "release": ["release", "--job", "j", "--yes"],
}
# each waits for its timeout
HUNG = ("locks", "history", "check", "audit", "run", "output", "release")


@pytest.fixture(scope="module")
def hung_port() -> Iterator[int]:
    """A port whose listener accepts every connection and never says a word."""
    server = socket.create_server(("127.0.0.1", 0))
    kept: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        server.settimeout(0.2)
        while not stop.is_set():
            try:
                kept.append(server.accept()[0])
            except TimeoutError:
                continue
            except OSError:
                return

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield server.getsockname()[1]
    stop.set()
    thread.join(5)
    for conn in kept:
        conn.close()
    server.close()


def _config(tmp_path: Path, url: str, extra: str = "") -> Path:
    path = tmp_path / "lockconsole.toml"
    strategy = "mysql" if url.startswith("mysql") else "pg-session"
    path.write_text(
        '[console]\nconnect_timeout = "1s"\nstatement_timeout = "2s"\n'
        f'[databases.main]\nurl = "{url}"\n'
        f'[jobs.j]\nstrategy = "{strategy}"\ncommand = ["true"]\n' + extra
    )
    return path


SCHEMES = {"postgresql": "postgresql://postgres@127.0.0.1:{port}/test",
           "mysql": "mysql://root@127.0.0.1:{port}/test"}  # fmt: skip


def _lockconsole(config: Path, words: list[str], env: dict[str, str]) -> CliResult:
    return run_cli(config, *words, env=env, timeout=90)


def _said_plainly(out: CliResult, command: str) -> None:
    assert "Traceback" not in out.stderr + out.stdout, out.stderr
    # check lists a database it could not read as a row of its own (database_error)
    said = out.stderr + (out.stdout if command == "check" else "")
    named = "main" in said or "127.0.0.1" in said  # by its name or its (masked) URL
    why = said.lower()
    assert named and any(w in why for w in ("connect", "no answer", "timeout", "timed out")), said


@pytest.mark.parametrize("dialect", sorted(SCHEMES))
@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_database_that_is_down_is_exit_5(command, dialect, tmp_path, cli_env) -> None:
    config = _config(tmp_path, SCHEMES[dialect].format(port=1))
    out = _lockconsole(config, COMMANDS[command], cli_env)
    assert out.returncode == 5, (command, out.returncode, out.stdout, out.stderr)
    _said_plainly(out, command)


@pytest.mark.parametrize("dialect", sorted(SCHEMES))
@pytest.mark.parametrize("command", HUNG)
def test_a_database_that_hangs_is_exit_5(command, dialect, tmp_path, cli_env, hung_port) -> None:
    config = _config(tmp_path, SCHEMES[dialect].format(port=hung_port))
    out = _lockconsole(config, COMMANDS[command], cli_env)
    assert out.returncode == 5, (command, out.returncode, out.stdout, out.stderr)
    _said_plainly(out, command)


@pytest.mark.parametrize("command", sorted(COMMANDS))
def test_a_bad_configuration_is_exit_2_in_one_line(command, tmp_path, cli_env, pg_url) -> None:
    config = _config(tmp_path, pg_url, "[jobs.j.idempotency]\ntable = 7\n")
    out = _lockconsole(config, COMMANDS[command], cli_env)
    assert out.returncode == 2, (command, out.returncode, out.stderr)
    assert len(out.stderr.strip().splitlines()) == 1 and "Traceback" not in out.stderr


def test_a_missing_extra_is_exit_2_naming_it(tmp_path, cli_env, pg_url) -> None:
    """The redis client and prometheus_client made unimportable: `run` of a redis job, `locks`
    on a Redis database and `metrics` each name the extra to install, exit 2."""
    shims = tmp_path / "shims"
    for name in ("redis", "prometheus_client"):
        (shims / name).mkdir(parents=True)
        (shims / name / "__init__.py").write_text(
            f'raise ImportError("No module named {name!r}")\n'
        )
    env = {**cli_env, "PYTHONPATH": str(shims)}
    config = tmp_path / "redis.toml"
    config.write_text(
        f'[lockconsole]\nledger_database = "main"\n[databases.main]\nurl = "{pg_url}"\n'
        '[databases.cache]\nurl = "redis://127.0.0.1:6379/0"\n'
        '[jobs.r]\ndatabase = "cache"\nstrategy = "redis"\ncommand = ["true"]\n'
    )
    for words, extra in (
        (["run", "r"], "lockconsole[redis]"),
        (["locks"], "lockconsole[redis]"),
        (["metrics", "--textfile", str(tmp_path / "m.prom")], "lockconsole[metrics]"),
    ):
        out = _lockconsole(config, words, env)
        assert out.returncode == 2, (words, out.returncode, out.stdout, out.stderr)
        assert extra in out.stderr and "Traceback" not in out.stderr, (words, out.stderr)
