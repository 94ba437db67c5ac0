"""What a run leaves for an investigator: `lockconsole run` keeps the last 64 KB of a command's
stdout and stderr, or a callable's exception and traceback, in the ledger's database
(PostgreSQL, MariaDB, SQLite), passwords masked; `lockconsole output RUN_ID` prints it."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

from lockconsole import run_once
from lockconsole.backends.ledger.outputs import output_of
from lockconsole.backends.ledger.store import Ledger
from lockconsole.config.loader import parse_config

from tests.support.cli import run_cli

SECRET = "hunter2secret"
LEAKY = (
    "import sys\n"
    f"print('connecting to postgresql://billing:{SECRET}@db.internal/billing')\n"
    "print('charged 3 tenants', flush=True)\n"
    "print('boom: tenant 4 has no card', file=sys.stderr)\n"
    "sys.exit(7)\n"
)
RAISING = (
    "def charge():\n    raise ValueError('card declined; dsn host=db password=" + SECRET + "')\n"
)


def strategy_of(url: str) -> str:
    return "lease" if url.startswith("sqlite") else "mysql" if "mysql" in url else "pg-session"


def script_job(write_config, dialect_url: str, job: str, script: Path) -> Path:
    """A config with one job that runs `script` on the dialect's database."""
    return write_config(
        f"""
        [databases.main]
        url = "{dialect_url}"
        [jobs.{job}]
        strategy = "{strategy_of(dialect_url)}"
        command = ["{sys.executable}", "{script}"]
        """
    )


def output_json(config: Path, run_id: int, env: dict[str, str]) -> dict[str, object]:
    done = run_cli(config, "output", str(run_id), "--json", env=env)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert found["run_id"] == run_id and found["found"] is True and found["schema"] == 1
    return found


@pytest.mark.mysql
def test_a_failed_commands_output_tail_is_kept_masked(
    dialect_url, uid, write_config, cli_env, tmp_path
):
    job = f"leaky_{uid}"
    script = tmp_path / "leaky.py"
    script.write_text(LEAKY, encoding="utf-8")
    config = script_job(write_config, dialect_url, job, script)
    done = run_cli(config, "run", job, "--json", env=cli_env)
    assert done.returncode == 7, done.stderr
    assert "boom: tenant 4" in done.stderr  # stderr still reaches the caller's stderr
    run = json.loads(done.stdout.strip().splitlines()[-1])
    assert run["outcome"] == "failed" and run["exit_code"] == 7
    found = output_json(config, run["id"], cli_env)
    assert found["job"] == job and found["outcome"] == "failed"
    text = str(found["output"])
    assert "charged 3 tenants" in text and "boom: tenant 4 has no card" in text
    assert "postgresql://billing:***@db.internal/billing" in text
    assert SECRET not in text
    shown = run_cli(config, "output", str(run["id"]), env=cli_env)
    assert shown.returncode == 0 and "boom: tenant 4 has no card" in shown.stdout
    assert SECRET not in shown.stdout + shown.stderr


@pytest.mark.mysql
def test_a_raising_callables_traceback_is_kept_masked(
    dialect_url, uid, write_config, cli_env, tmp_path
):
    job = f"raising_{uid}"
    module = f"charging_{uid}"
    (tmp_path / f"{module}.py").write_text(RAISING, encoding="utf-8")
    env = dict(cli_env, PYTHONPATH=f"{tmp_path}{os.pathsep}{cli_env['PYTHONPATH']}")
    config = write_config(
        f"""
        [databases.main]
        url = "{dialect_url}"
        [jobs.{job}]
        strategy = "{strategy_of(dialect_url)}"
        callable = "{module}:charge"
        """
    )
    done = run_cli(config, "run", job, "--json", env=env)
    assert done.returncode == 1, done.stderr
    run = json.loads(done.stdout.strip().splitlines()[-1])
    text = str(output_json(config, run["id"], env)["output"])
    assert text.startswith("Traceback (most recent call last):")
    assert f'{module}.py", line 2, in charge' in text
    assert "ValueError: card declined" in text and "password=***" in text
    assert SECRET not in text


def _charge_in_the_body(dsn: str) -> None:
    raise ConnectionError(f"cannot reach {dsn}")


@pytest.mark.mysql
def test_an_exception_out_of_a_run_once_body_keeps_its_traceback_masked(dialect_url, uid) -> None:
    job = f"body_{uid}"
    config = parse_config(
        f'[databases.main]\nurl = "{dialect_url}"\n'
        f'[jobs.{job}]\nstrategy = "{strategy_of(dialect_url)}"\n',
        "<test>",
    )
    with pytest.raises(ConnectionError), run_once(job, config=config, reuse_connections=False):
        _charge_in_the_body(f"postgresql://billing:{SECRET}@db.internal/billing")
    with Ledger(config.ledger_for(config.job(job))) as ledger:
        (run,) = ledger.runs(job)
        assert run.id is not None and run.outcome == "failed"
        found = output_of(ledger, run.id)
    assert found is not None and found.output is not None
    text = found.output
    assert text.startswith("Traceback (most recent call last):")
    assert "in _charge_in_the_body" in text and "test_run_output.py" in text
    assert "ConnectionError: cannot reach postgresql://billing:***@db.internal/billing" in text
    assert SECRET not in text


def test_only_the_last_64_kb_are_kept_and_a_quiet_run_keeps_none(
    pg_url, uid, write_config, cli_env, tmp_path
):
    job = f"chatty_{uid}"
    config = write_config(
        f"""
        [databases.main]
        url = "{pg_url}"
        [jobs.{job}]
        command = ["true"]
        """
    )
    chatty = "for i in range(20000): print(f'line {i:06d}')"  # 240,000 bytes
    done = run_cli(config, "run", job, "--json", "--", sys.executable, "-c", chatty, env=cli_env)
    assert done.returncode == 0, done.stderr
    run = json.loads(done.stdout.strip().splitlines()[-1])
    text = str(output_json(config, run["id"], cli_env)["output"])
    head, body = text.split("\n", 1)
    assert head == f"[… {240000 - len(body.encode())} earlier bytes not kept]"
    assert 65536 - 12 < len(body.encode()) <= 65536  # from the first whole line of the last 64 KB
    assert body.startswith("line ") and body.endswith("line 019999\n")

    quiet = run_cli(config, "run", job, "--manual", "--json", env=cli_env)
    assert quiet.returncode == 0, quiet.stderr
    run = json.loads(quiet.stdout.strip().splitlines()[-1])
    assert output_json(config, run["id"], cli_env)["output"] is None
    missing = run_cli(config, "output", "999999999999", env=cli_env)
    assert missing.returncode == 1 and "no run 999999999999" in missing.stderr
    bad = run_cli(config, "output", "-5", env=cli_env)
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1


CUT_SECRET = "Zq9xWv7Kp3LmRt"  # no 4 characters of it are in the filler or the test's words
KEPT = 65536  # the last 64 KB are kept
MARGIN = 4096  # the tail the runner keeps is this much longer (masked before the last cut)


def _across_the_cut(line: str, distance: int) -> str:
    """Filler lines, `line`, filler lines: the byte `distance` from the end of it all falls in
    the middle of CUT_SECRET in `line`."""
    middle = line.index(CUT_SECRET) + len(CUT_SECRET) // 2
    after = distance - (len(line) - middle)
    filler = ("y" * 79 + "\n") * (after // 80) + (
        "z" * (after % 80 - 1) + "\n" if after % 80 else ""
    )
    assert len(filler) == after
    return ("x" * 79 + "\n") * 300 + line + filler


@pytest.mark.parametrize(
    "distance", [KEPT, KEPT + MARGIN], ids=["at the last cut", "at the tail's cut"]
)
@pytest.mark.parametrize("kind", ["url", "configured"])
def test_no_fragment_of_a_password_survives_at_the_cut(
    pg_url, uid, write_config, cli_env, tmp_path, kind, distance
):
    job = f"cut_{uid}"
    line = (
        f"connecting to postgresql://billing:{CUT_SECRET}@db.internal/billing\n"
        if kind == "url"
        else f"the billing token {CUT_SECRET} is in use\n"  # the configured password, bare
    )
    printed = tmp_path / "printed.txt"
    printed.write_text(_across_the_cut(line, distance), encoding="utf-8")
    script = tmp_path / "cut.py"
    script.write_text(f"import sys\nsys.stdout.write(open({str(printed)!r}).read())\n")
    config = write_config(
        f"""
        [databases.main]
        url = "{pg_url}"
        [databases.billing]
        url = "postgresql://billing:{CUT_SECRET}@127.0.0.1:1/billing"
        [jobs.{job}]
        database = "main"
        command = ["{sys.executable}", "{script}"]
        """
    )
    done = run_cli(config, "run", job, "--json", env=cli_env)
    assert done.returncode == 0, done.stderr
    run = json.loads(done.stdout.strip().splitlines()[-1])
    text = str(output_json(config, run["id"], cli_env)["output"])
    assert text.startswith("[… ") and text.endswith("\n")
    fragments = {CUT_SECRET[i : i + 4] for i in range(len(CUT_SECRET) - 3)}
    assert not [f for f in fragments if f in text], "a fragment of the password was kept"


ENV_SECRETS = {
    "PGPASSWORD": "pg-Secret-1",
    "MYSQL_PWD": "my-Secret-2",
    "BILLING_API_TOKEN": "tok-Secret-3",
    "db_secret_key": "low-Secret-4",  # any case
    "SHORT_PASSWORD": "abc",  # under 4 characters: masking it would hit ordinary words
}
PRINTS_ENV = (
    "import os\n"
    "for name in sorted(os.environ):\n"
    f"    if name in {sorted(ENV_SECRETS)!r} or name == 'BILLING_REGION':\n"
    "        print(f'{name}={os.environ[name]}')\n"
)


@pytest.mark.mysql
def test_the_values_of_secret_variables_are_masked_in_the_tail(
    dialect_url, uid, write_config, cli_env, tmp_path
):
    job = f"envleak_{uid}"
    script = tmp_path / "envleak.py"
    script.write_text(PRINTS_ENV, encoding="utf-8")
    config = script_job(write_config, dialect_url, job, script)
    env = {**cli_env, **ENV_SECRETS, "BILLING_REGION": "eu-west-visible"}
    done = run_cli(config, "run", job, "--json", env=env)
    assert done.returncode == 0, done.stderr
    run_id = json.loads(done.stdout.strip().splitlines()[-1])["id"]
    # the stored tail, read straight from the ledger (no masking on the way out)
    stored = output_of(Ledger(parse_config(config.read_text()).databases["main"]), run_id)
    assert stored is not None and stored.output is not None
    for name, value in ENV_SECRETS.items():
        assert f"{name}=" in stored.output
        assert (value in stored.output) == (len(value) < 4), (name, stored.output)
    assert "BILLING_REGION=eu-west-visible" in stored.output  # not a secret's name
    assert "PGPASSWORD=***" in stored.output and "BILLING_API_TOKEN=***" in stored.output
    for args in (["output", str(run_id)], ["output", str(run_id), "--json"]):
        shown = run_cli(config, *args, env=env)
        assert shown.returncode == 0, shown.stderr
        assert "MYSQL_PWD=***" in shown.stdout and "eu-west-visible" in shown.stdout
        assert not [v for v in ENV_SECRETS.values() if len(v) >= 4 and v in shown.stdout]
