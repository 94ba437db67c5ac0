"""Configuration: every mistake is one line on stderr, exit 2, no traceback, nothing changed."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import textwrap
from datetime import timedelta
from pathlib import Path

import pytest

from lockconsole.config.loader import find_config, parse_config, parse_duration
from lockconsole.model import keys
from lockconsole.model.errors import ConfigError
from lockconsole.model.jobs import LockKey

from tests.support.cli import CliResult, run_cli
from tests.support.helpers import unavailable
from tests.support.settings import DATA, PYTHON

BAD_DIR = DATA / "bad"
BAD_FILES = sorted(BAD_DIR.glob("*.toml"))
CORPUS_PG_URL = "postgresql://postgres@127.0.0.1:5432/test"


def assert_one_line_error(result: CliResult | subprocess.CompletedProcess[str]) -> str:
    """Exit 2, stdout empty, stderr exactly one non-empty line, no traceback anywhere."""
    assert "Traceback" not in result.stdout + result.stderr, result.stderr
    assert result.returncode == 2, (result.returncode, result.stderr)
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1 and lines[0].strip(), result.stderr
    assert result.stderr.endswith("\n")
    return lines[0]


def headers(path: Path) -> tuple[str, int | None]:
    text = path.read_text(encoding="utf-8")
    expect = re.search(r"^# expect: (.+)$", text, re.M)
    line = re.search(r"^# line: (\d+)$", text, re.M)
    assert expect, f"{path.name} has no '# expect:' line"
    return expect.group(1).strip(), int(line.group(1)) if line else None


# (a) the corpus of malformed configs -------------------------------------------------------


def test_corpus_is_big_enough() -> None:
    assert len(BAD_FILES) >= 55
    for path in BAD_FILES:
        assert path.read_text(encoding="utf-8").startswith("# expect: "), path.name


def test_bad_config_in_process_raises_config_error() -> None:
    """The same corpus through parse_config: always ConfigError, never another exception."""
    for path in BAD_FILES:
        expect, line = headers(path)
        with pytest.raises(ConfigError) as info:
            parse_config(path.read_text(encoding="utf-8"), str(path), environ={})
        assert expect in str(info.value), (path.name, str(info.value))
        assert "\n" not in str(info.value)
        if line is not None:
            assert info.value.line == line, (path.name, str(info.value))


# (b) good configs --------------------------------------------------------------------------

DB = """
[databases.main]
url = "postgresql://billing@db.internal/billing"
"""


def parse(text: str, environ: dict[str, str] | None = None):
    return parse_config(textwrap.dedent(text), "good.toml", environ or {})


def test_defaults() -> None:
    config = parse(DB + "[jobs.nightly_billing]\n")
    job = config.job("nightly_billing")
    assert job.database == "main"
    assert job.strategy == "pg-session"
    assert job.timezone == "UTC"
    assert job.schedule is None and job.command is None and job.callable is None
    assert job.max_duration is None and job.min_hold == timedelta(0)
    assert job.lease_table == "shedlock" and job.once_per_slot is True
    assert job.watchdog_interval == 5.0 and job.stop_grace == 10.0
    assert job.idempotency is None and job.ledger_commit == "durable"
    assert config.ledger_database is None
    assert config.ledger_for(job).name == "main"
    # a literal: sha256('nightly_billing')'s first 8 bytes, signed (computed apart from lockconsole)
    assert job.key == LockKey("int64", 6934764366447324402, "sha256('nightly_billing')")


def test_ledger_commit_async_where_it_applies(tmp_path: Path, cli_env: dict[str, str]) -> None:
    """pg-session, pg-xact and lease jobs with the ledger in their own PostgreSQL database take
    "async"; `config --json` says which each job has."""
    text = DB + "".join(
        f'[jobs.{s.replace("-", "_")}]\nstrategy = "{s}"\nledger_commit = "async"\n'
        for s in ("pg-session", "pg-xact", "lease")
    )
    text += "[jobs.plain]\n"
    config = parse(text)
    assert {n: j.ledger_commit for n, j in config.jobs.items()} == {
        "pg_session": "async",
        "pg_xact": "async",
        "lease": "async",
        "plain": "durable",
    }
    same = parse(  # a ledger_database that names the same URL: the statements still merge
        '[lockconsole]\nledger_database = "ops"\n' + DB + "[databases.ops]\n"
        'url = "postgresql://billing@db.internal/billing"\n'
        '[jobs.j]\ndatabase = "main"\nledger_commit = "async"\n'
    )
    assert same.job("j").ledger_commit == "async"
    path = tmp_path / "lockconsole.toml"
    path.write_text(text, encoding="utf-8")
    result = run_cli(None, "--config", str(path), "config", "--json", env=cli_env)
    assert result.returncode == 0, result.stderr
    jobs = json.loads(result.stdout)["jobs"]
    assert jobs["pg_xact"]["ledger_commit"] == "async"
    assert jobs["plain"]["ledger_commit"] == "durable"
    text_view = run_cli(None, "--config", str(path), "config", env=cli_env).stdout
    assert "job lease: lease" in text_view and "ledger_commit=async" in text_view


def test_design_sketch_parses() -> None:
    config = parse(
        DB
        + """
        [jobs.nightly_billing]
        database = "main"
        schedule = "0 2 * * *"
        timezone = "Europe/Berlin"
        strategy = "pg-session"
        key = 4242
        command = ["python", "-m", "billing.nightly"]
        max_duration = "2h"
        min_hold = "5m"

        [jobs.nightly_billing.idempotency]
        table = "billing.invoices"
        key = ["tenant_id", "period"]
        run_column = "run_id"
        """
    )
    job = config.job("nightly_billing")
    assert job.key == LockKey("int64", 4242)
    assert job.schedule == "0 2 * * *" and job.timezone == "Europe/Berlin"
    assert job.command == ("python", "-m", "billing.nightly")
    assert job.max_duration == timedelta(hours=2) and job.min_hold == timedelta(minutes=5)
    assert job.idempotency is not None
    assert job.idempotency.table == "billing.invoices"
    assert job.idempotency.key == ("tenant_id", "period")
    assert job.idempotency.run_column == "run_id"


@pytest.mark.parametrize(
    ("key_toml", "recipe", "expected"),
    [
        ("key = 4242", None, LockKey("int64", 4242)),
        ("key = -4294967301", None, LockKey("int64", -4294967301)),
        ("key = 9223372036854775807", None, LockKey("int64", keys.INT64_MAX)),
        ("key = -9223372036854775808", None, LockKey("int64", keys.INT64_MIN)),
        ("key = [7, -2]", None, LockKey("int4pair", (7, -2))),
        ("key = [2147483647, -2147483648]", None, LockKey("int4pair", (2**31 - 1, -(2**31)))),
        (
            'key = "billing"',
            None,
            LockKey("int64", 906850720199613079, "sha256('billing')"),  # a literal
        ),
        (
            'key = "my-lock"',
            "goodjob-md5",
            LockKey("int64", -1323429866322628863, "goodjob-md5('my-lock')"),
        ),
    ],
)
def test_key_derivation(key_toml: str, recipe: str | None, expected: LockKey) -> None:
    extra = f'key_recipe = "{recipe}"\n' if recipe else ""
    job = parse(DB + f"[jobs.j]\n{key_toml}\n{extra}").job("j")
    assert job.key == expected


def test_key_of_a_job_without_key_is_the_hash_of_its_name() -> None:
    config = parse(DB + '[jobs."billing.nightly:eu-1"]\n[jobs.other]\nkey_recipe = "goodjob-md5"\n')
    name = "billing.nightly:eu-1"
    # literals, computed apart from lockconsole (hashlib's sha256; PostgreSQL's md5 for
    # goodjob-md5): a recipe that changed would move every fleet's lock
    assert config.job(name).key.value == -2201245044647794634
    assert config.job("other").key.value == 8745763988525856444


def test_mysql_and_lease_names_default_to_the_job_name() -> None:
    config = parse(
        """
        [databases.my]
        url = "mysql://root@127.0.0.1:3306/test"
        [databases.lite]
        url = "sqlite:///jobs.db"

        [jobs.report]
        database = "my"
        strategy = "mysql"
        [jobs.named]
        database = "my"
        strategy = "mysql"
        key = "reports:daily"
        [jobs.lease_job]
        database = "lite"
        strategy = "lease"
        """
    )
    assert config.job("report").key == LockKey("name", "report")
    assert config.job("named").key == LockKey("name", "reports:daily")
    lease = config.job("lease_job")
    assert lease.key == LockKey("name", "lease_job")
    assert lease.max_duration == timedelta(hours=1)  # lockAtMostFor is never unbounded


def test_every_console_action_can_be_rebound() -> None:
    """The audit screen's id is known to [keys] like the others (its "a" is taken, too)."""
    config = parse(DB + '[keys]\naudit = "A"\ntrigger = "T"\n')
    assert config.keymap == {"audit": "A", "trigger": "T"}


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ('"2h"', timedelta(hours=2)),
        ('"1h30m"', timedelta(hours=1, minutes=30)),
        ('"500ms"', timedelta(milliseconds=500)),
        ("90", timedelta(seconds=90)),
        ("1.5", timedelta(seconds=1.5)),
        ('"1d"', timedelta(days=1)),
        ('"45s"', timedelta(seconds=45)),
    ],
)
def test_durations(value: str, expected: timedelta) -> None:
    job = parse(DB + f"[jobs.j]\nmax_duration = {value}\n").job("j")
    assert job.max_duration == expected


def test_parse_duration_directly() -> None:
    assert parse_duration("1h 30m") == timedelta(minutes=90)
    assert parse_duration(0) == timedelta(0)
    for bad in ("2 hours", "-5m", "5x", "", -5, True, None, float("nan"), "h", "1.h"):
        with pytest.raises(ValueError):
            parse_duration(bad)


def test_intervals_accept_numbers_and_durations() -> None:
    job = parse(DB + '[jobs.j]\nwatchdog_interval = "500ms"\nstop_grace = 3\n').job("j")
    assert job.watchdog_interval == 0.5 and job.stop_grace == 3.0


def test_env_interpolation_and_password_masking(write_config, cli_env: dict[str, str]) -> None:
    secret = "s3cr3t/pw@x"
    quoted = "s3cr3t%2Fpw%40x"
    config = parse(
        """
        [databases.main]
        url = "postgresql://billing:${BILLING_PW}@${BILLING_HOST}:6432/billing"
        [jobs.j]
        """,
        {"BILLING_PW": quoted, "BILLING_HOST": "db.internal"},
    )
    url = config.databases["main"].url
    assert url.password == secret and url.host == "db.internal" and url.port == 6432
    assert secret not in repr(url) and quoted not in repr(url)

    path = write_config(
        """
        [databases.main]
        url = "postgresql://billing:${BILLING_PW}@db.internal/billing?password=${BILLING_PW}"
        [jobs.j]
        """
    )
    cli_env["BILLING_PW"] = quoted
    for args in (["config", "--json"], ["config"]):
        result = run_cli(None, "--config", str(path), *args, env=cli_env)
        assert result.returncode == 0, result.stderr
        for out in (result.stdout, result.stderr):
            assert secret not in out and quoted not in out
            assert "s3cr3t" not in out
        assert "***" in result.stdout
    data = json.loads(run_cli(None, "--config", str(path), "config", "--json", env=cli_env).stdout)
    assert data["schema"] == 1  # every --json document names its version
    assert data["databases"]["main"].startswith("postgresql://billing:***@db.internal/billing")
    assert data["jobs"]["j"]["key"] == str(keys.name_to_int64("j"))


# (c) search order ---------------------------------------------------------------------------


def _job_config(path: Path, job: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(DB) + f"[jobs.{job}]\n", encoding="utf-8")
    return path


def test_search_order(tmp_path: Path, cli_env: dict[str, str]) -> None:
    work = tmp_path / "work"
    explicit = _job_config(tmp_path / "explicit.toml", "from_flag")
    env_file = _job_config(tmp_path / "env.toml", "from_env")
    local = _job_config(work / "lockconsole.toml", "from_cwd")
    xdg = _job_config(Path(cli_env["XDG_CONFIG_HOME"]) / "lockconsole" / "config.toml", "from_xdg")

    def resolved(*args: str, **env: str) -> str:
        result = run_cli(None, *args, "config", "--json", env={**cli_env, **env}, cwd=work)
        assert result.returncode == 0, result.stderr
        return next(iter(json.loads(result.stdout)["jobs"]))

    assert resolved("--config", str(explicit), LOCKCONSOLE_CONFIG=str(env_file)) == "from_flag"
    assert resolved(LOCKCONSOLE_CONFIG=str(env_file)) == "from_env"
    assert resolved() == "from_cwd"
    local.unlink()
    assert resolved() == "from_xdg"
    xdg.unlink()
    error = assert_one_line_error(run_cli(None, "config", env=cli_env, cwd=work))
    assert "no configuration found" in error
    assert error.endswith("; `lockconsole init` writes a starter file"), error

    # the same order in-process
    env = {"LOCKCONSOLE_CONFIG": str(env_file), "XDG_CONFIG_HOME": str(tmp_path / "none")}
    assert find_config(str(explicit), env) == explicit
    assert find_config(None, env) == env_file


def test_xdg_default_is_home_dot_config(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    found = _job_config(tmp_path / "home" / ".config" / "lockconsole" / "config.toml", "h")
    assert find_config(None, {}).resolve() == found.resolve()


# (d) bad command lines and environment ------------------------------------------------------


def _bad_cli_cases(tmp_path: Path) -> dict[str, tuple[list[str], dict[str, str], str]]:
    good = _job_config(tmp_path / "good.toml", "j")
    binary = tmp_path / "binary.toml"
    binary.write_bytes(b"\xff\xfe\x00garbage\x00\x89PNG")
    nul = tmp_path / "nul.toml"
    nul.write_bytes(b'[databases.main]\nurl = "a\x00b"\n')
    folder = tmp_path / "folder.toml"
    folder.mkdir()
    missing = str(tmp_path / "missing.toml")
    cfg = ["--config", str(good)]
    return {
        "unknown subcommand": ([*cfg, "frobnicate"], {}, "invalid choice"),
        "unknown option": ([*cfg, "--frobnicate", "config"], {}, "--frobnicate"),
        "unknown config option": ([*cfg, "config", "--yaml"], {}, "--yaml"),
        "no subcommand": (cfg, {}, "choose a command"),
        "--config without value": (["--config"], {}, "--config"),
        "missing --config file": (["--config", missing, "config"], {}, "not found"),
        "directory as --config": (["--config", str(folder), "config"], {}, "folder.toml"),
        "missing $LOCKCONSOLE_CONFIG": (["config"], {"LOCKCONSOLE_CONFIG": missing}, "missing"),
        "binary config": (["--config", str(binary), "config"], {}, "not a UTF-8 text file"),
        "NUL byte in config": (["--config", str(nul), "config"], {}, "not valid TOML"),
    }


def test_bad_command_lines(tmp_path: Path, cli_env: dict[str, str]) -> None:
    for name, (args, env, expect) in _bad_cli_cases(tmp_path).items():
        result = run_cli(None, *args, env={**cli_env, **env}, cwd=tmp_path)
        error = assert_one_line_error(result)
        assert expect in error, (name, error)
        assert not error.startswith("lockconsole: lockconsole"), (name, error)


def as_unprivileged() -> list[str]:
    """A command prefix that runs as `nobody` when we are root (nothing when we are not)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        unavailable("running as root without setpriv: cannot drop to an unprivileged user")
    return [setpriv, "--reuid=nobody", "--regid=nogroup", "--clear-groups"]


def test_unreadable_config(cli_env: dict[str, str]) -> None:
    """A mode-0 file is "cannot read", run as a user the mode applies to (never as root)."""
    prefix = as_unprivileged()
    folder = Path(tempfile.mkdtemp(prefix="lockconsole-mode0-"))  # traversable by nobody
    try:
        folder.chmod(0o755)
        path = _job_config(folder / "secret.toml", "j")

        def run(*args: str) -> subprocess.CompletedProcess[str]:
            return subprocess.run(
                [*prefix, PYTHON, *args],
                env=cli_env,
                cwd=folder,
                capture_output=True,
                text=True,
                timeout=60,
            )

        who = run("-c", "import os; print(os.geteuid())")
        assert who.returncode == 0 and who.stdout.strip() != "0", who.stderr
        path.chmod(0o644)  # the control: the same user reads the same file when it may
        assert run("-m", "lockconsole", "--config", str(path), "config").returncode == 0
        path.chmod(0)
        error = assert_one_line_error(run("-m", "lockconsole", "--config", str(path), "config"))
        assert "cannot read" in error and str(path) in error
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def test_the_system_wide_file_comes_last(tmp_path: Path, monkeypatch) -> None:
    """/etc/lockconsole/config.toml (here pointed elsewhere) is found only when nothing else is."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    system = _job_config(tmp_path / "etc" / "config.toml", "s")
    env = {"LOCKCONSOLE_SYSTEM_CONFIG": str(system)}
    assert find_config(None, env) == system
    user = _job_config(tmp_path / "home" / ".config" / "lockconsole" / "config.toml", "u")
    assert find_config(None, env).resolve() == user.resolve()
