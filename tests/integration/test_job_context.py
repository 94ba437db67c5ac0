"""A job knows its attempt: a command finds LOCKCONSOLE_JOB, _SLOT, _RUN_ID, _INSTANCE, _TRIGGER
and _FENCING_TOKEN in its environment, and `run_once`'s attempt carries the same context, on
every ledger dialect and every strategy that issues a token."""

from __future__ import annotations

import json
import shlex
import shutil
import subprocess
import sys
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from lockconsole import run_once
from lockconsole.config.loader import parse_config
from lockconsole.model.context import ENVIRONMENT

from tests.support.cli import run_cli
from tests.support.helpers import unavailable
from tests.support.settings import ROOT

# the job writes what it was given, and nothing else of its environment, to the file it is told
DUMP = (
    "import json, os, sys\n"
    "names = [n for n in os.environ if n.startswith('LOCKCONSOLE_')]\n"
    "json.dump({n: os.environ[n] for n in names}, open(sys.argv[1], 'w'))\n"
)


def strategy_of(url: str) -> str:
    return "lease" if url.startswith("sqlite") else "mysql" if "mysql" in url else "pg-session"


def run_json(config: Path, *words: str, env: dict[str, str]) -> dict[str, Any]:
    done = run_cli(config, "run", *words, "--json", env=env)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.mysql
def test_a_command_job_reads_its_attempt_from_its_environment(
    dialect_url, uid, write_config, cli_env, tmp_path
):
    job = f"ctx_{uid}"
    script, seen = tmp_path / "dump.py", tmp_path / "seen.json"
    script.write_text(DUMP, encoding="utf-8")
    config = write_config(
        f"""
        [databases.billing]
        url = "{dialect_url}"
        [jobs.{job}]
        strategy = "{strategy_of(dialect_url)}"
        command = ["{sys.executable}", "{script}", "{seen}"]
        """
    )
    env = dict(cli_env, LOCKCONSOLE_INSTANCE=f"web-{uid}", LOCKCONSOLE_RUN_ID="stale-outer-value")
    run = run_json(config, job, env=env)
    assert run["outcome"] == "succeeded"
    context = json.loads(seen.read_text(encoding="utf-8"))
    assert context["LOCKCONSOLE_JOB"] == job
    assert context["LOCKCONSOLE_RUN_ID"] == f"billing:{run['id']}"  # the ledger's name, then id
    assert context["LOCKCONSOLE_INSTANCE"] == f"web-{uid}" == run["instance"]
    assert context["LOCKCONSOLE_TRIGGER"] == "scheduled" == run["trigger"]
    slot = datetime.fromisoformat(context["LOCKCONSOLE_SLOT"])
    assert slot.utcoffset() is not None and slot.utcoffset().total_seconds() == 0
    assert slot == datetime.fromisoformat(str(run["slot"]))
    if run["fencing_token"] is None:
        assert "LOCKCONSOLE_FENCING_TOKEN" not in context  # unknown is unset, never ""
    else:
        assert context["LOCKCONSOLE_FENCING_TOKEN"] == str(run["fencing_token"])
    assert set(context) <= set(ENVIRONMENT)


def test_a_manual_run_tells_the_job_its_trigger_and_its_own_slot(
    pg_url, uid, write_config, cli_env, tmp_path
):
    job = f"ctx_{uid}"
    script, seen = tmp_path / "dump.py", tmp_path / "seen.json"
    script.write_text(DUMP, encoding="utf-8")
    config = write_config(
        f"""
        [databases.main]
        url = "{pg_url}"
        [jobs.{job}]
        strategy = "lease"
        schedule = "0 2 * * *"
        command = ["{sys.executable}", "{script}", "{seen}"]
        """
    )
    run = run_json(config, job, "--manual", env=cli_env)
    context = json.loads(seen.read_text(encoding="utf-8"))
    assert context["LOCKCONSOLE_TRIGGER"] == run["trigger"] == "manual"
    assert datetime.fromisoformat(context["LOCKCONSOLE_SLOT"]) == datetime.fromisoformat(
        str(run["slot"])
    )
    assert int(context["LOCKCONSOLE_FENCING_TOKEN"]) == run["fencing_token"] >= 1


def test_run_once_carries_the_same_context(pg_url, uid, empty_registry):
    config = parse_config(
        f'[databases.main]\nurl = "{pg_url}"\n[jobs.ctx_{uid}]\nstrategy = "lease"\n'
    )
    slot = datetime(2026, 11, 30, 2, 0, tzinfo=UTC)
    with run_once(f"ctx_{uid}", config=config, instance="app-1", slot=slot) as attempt:
        assert attempt.acquired
        context = attempt.context
        assert context.job == f"ctx_{uid}" and context.instance == "app-1"
        assert context.slot == slot and context.slot_text == "2026-11-30T02:00:00+00:00"
        assert context.run_id == f"main:{attempt.run.id}"
        assert context.fencing_token == attempt.run.fencing_token is not None
        assert context.environment()["LOCKCONSOLE_RUN_ID"] == context.run_id


TALKATIVE = (
    "import sys\n"
    "for i in range(200):\n"
    "    print('tenant', i, 'charged {\"x\": 1}')\n"
    "sys.stdout.flush()\n"
)


def test_run_json_stdout_carries_only_the_document(pg_url, uid, write_config, cli_env, tmp_path):
    """A talkative job under `run --json`: its stdout goes to stderr, ours parses as one object."""
    script = tmp_path / "talk.py"
    script.write_text(TALKATIVE, encoding="utf-8")
    module = f"talking_{uid}"
    (tmp_path / f"{module}.py").write_text(
        "def talk():\n    for i in range(50):\n        print('callable says', i)\n",
        encoding="utf-8",
    )
    env = dict(cli_env, PYTHONPATH=f"{tmp_path}:{cli_env['PYTHONPATH']}")
    config = write_config(
        f"""
        [databases.main]
        url = "{pg_url}"
        [jobs.cmd_{uid}]
        strategy = "pg-session"
        command = ["{sys.executable}", "{script}"]
        [jobs.py_{uid}]
        strategy = "pg-session"
        callable = "{module}:talk"
        """
    )
    for job, said in ((f"cmd_{uid}", "tenant 199 charged"), (f"py_{uid}", "callable says 49")):
        done = subprocess.run(
            [sys.executable, "-m", "lockconsole", "--config", str(config), "run", job, "--json"],
            capture_output=True, text=True, env=env, timeout=120, stdin=subprocess.DEVNULL,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        document = json.loads(done.stdout)  # the whole of stdout is one JSON document
        assert document["schema"] == 1 and document["outcome"] == "succeeded"
        assert document["ledger"] == "main" and document["run_id"] == f"main:{document['id']}"
        assert "actor" in document
        assert said in done.stderr
        if shutil.which("jq") is None:
            unavailable("jq is not installed (apt-get install jq)")
        piped = subprocess.run(  # as a script would read it
            f"{shlex.quote(sys.executable)} -m lockconsole --config {shlex.quote(str(config))} "
            f"run {job} --manual --json | jq -e -r .outcome",
            shell=True, capture_output=True, text=True, env=env, timeout=120,
            stdin=subprocess.DEVNULL,
        )  # fmt: skip
        assert piped.returncode == 0, piped.stderr
        assert piped.stdout == "succeeded\n" and said in piped.stderr, piped


def test_the_environments_instance_beats_the_configs_and_the_flag_beats_both(
    pg_url, uid, write_config, cli_env
):
    """`--instance`, then `$LOCKCONSOLE_INSTANCE`, then the config's `instance`, then the host
    name: one shared config (a ConfigMap) gets each instance's name from its environment."""
    job = f"named_{uid}"
    config = write_config(
        f"""
        [lockconsole]
        instance = "from-file-{uid}"
        [databases.main]
        url = "{pg_url}"
        [jobs.{job}]
        strategy = "pg-session"
        command = ["true"]
        """
    )
    plain = {k: v for k, v in cli_env.items() if k != "LOCKCONSOLE_INSTANCE"}
    named = dict(plain, LOCKCONSOLE_INSTANCE=f"from-env-{uid}")
    assert run_json(config, job, "--manual", env=plain)["instance"] == f"from-file-{uid}"
    assert run_json(config, job, "--manual", env=named)["instance"] == f"from-env-{uid}"
    flagged = run_json(config, job, "--manual", "--instance", f"from-flag-{uid}", env=named)
    assert flagged["instance"] == f"from-flag-{uid}"


def readme_block(after: str, lang: str) -> str:
    """The first ```lang block of README.md after the line `after`."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    rest = text[text.index(after) :]
    start = rest.index(f"```{lang}\n") + len(f"```{lang}\n")
    return rest[start : rest.index("```", start)]


def test_the_readmes_shell_job_keyed_on_the_slot_inserts_nothing_twice(
    pg_url, pg_conn, uid, write_config, cli_env, tmp_path
):
    """The README's shell job, run by `lockconsole run` on PostgreSQL through psql: one invoice
    per tenant for the slot; the same script again for that slot (a rerun) adds none, and the
    next slot bills again."""
    if shutil.which("psql") is None:
        unavailable("psql is not installed (apt-get install postgresql-client)")
    schema = f"readme_{uid}"
    pg_conn.execute(f"create schema {schema}")
    try:
        pg_conn.execute(
            f"create table {schema}.tenants (id int primary key, monthly_fee int not null);"
            f"insert into {schema}.tenants select i, 10 * i from generate_series(1, 5) i;"
            f"create table {schema}.invoices (tenant_id int, period text, amount int,"
            f" run_id text, primary key (tenant_id, period))"
        )
        script = tmp_path / "bill.sh"
        script.write_text(readme_block("A shell job keyed on the slot", "sh"), encoding="utf-8")
        script.chmod(0o755)
        job = f"shell_bill_{uid}"
        config = write_config(
            f'[databases.billing]\nurl = "{pg_url}"\n[jobs.{job}]\nstrategy = "pg-session"\n'
            f'command = ["{script}"]\n'
        )
        sep = "&" if "?" in pg_url else "?"
        env = dict(cli_env, BILLING_URL=f"{pg_url}{sep}options=-csearch_path%3D{schema}")

        def invoices() -> list[tuple[int, str, str]]:
            return pg_conn.execute(
                f"select tenant_id, period, run_id from {schema}.invoices order by 2, 1"
            ).fetchall()

        first = run_json(config, job, "--slot", "2026-11-29T02:00:00Z", env=env)
        assert first["outcome"] == "succeeded", first
        billed = invoices()
        assert len(billed) == 5 and {r[2] for r in billed} == {first["run_id"]}, billed
        assert {r[1] for r in billed} == {"2026-11-29T02:00:00+00:00"}
        again = subprocess.run(  # the job run again for the same slot: nothing twice
            [str(script)], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL,
            env=dict(env, LOCKCONSOLE_SLOT="2026-11-29T02:00:00+00:00", LOCKCONSOLE_RUN_ID="x:1"),
        )  # fmt: skip
        assert again.returncode == 0, again.stderr
        assert invoices() == billed
        second = run_json(config, job, "--slot", "2026-11-30T02:00:00Z", env=env)
        assert second["outcome"] == "succeeded" and len(invoices()) == 10
    finally:
        pg_conn.execute(f"drop schema {schema} cascade")


def test_the_readmes_python_job_keyed_on_the_slot_charges_each_tenant_once(
    own_database, write_config, monkeypatch
):
    """The README's Python job, executed as written (its two app functions given by the test):
    run twice for one slot with once_per_slot off, so the second run gets the lock too, its
    claims find every key taken and it charges nobody again."""
    import types

    import psycopg

    conn = psycopg.connect(own_database)
    conn.execute(
        "create table invoices (tenant_id int, period text, run_id text,"
        " primary key (tenant_id, period))"
    )
    conn.commit()
    config = write_config(
        f'[databases.billing]\nurl = "{own_database}"\n[jobs.nightly_billing]\n'
        'strategy = "pg-session"\nschedule = "0 2 * * *"\nonce_per_slot = false\n'
    )
    monkeypatch.setenv("LOCKCONSOLE_CONFIG", str(config))
    charged: list[int] = []
    tenants = [types.SimpleNamespace(id=i) for i in (1, 2, 3)]
    code = compile(readme_block("Python job keyed on the slot:", "python"), "README.md", "exec")
    try:
        for _ in range(2):
            exec(  # noqa: S102  (the README's own example, run as written)
                code,
                {
                    "conn": conn,
                    "tenants_renewing_today": lambda: tenants,
                    "charge": lambda t: charged.append(t.id),
                },
            )
        rows = conn.execute("select tenant_id, period, run_id from invoices order by 1").fetchall()
    finally:
        conn.close()
    assert charged == [1, 2, 3], charged  # the second run of the slot charged nobody again
    assert [r[0] for r in rows] == [1, 2, 3] and len({r[1] for r in rows}) == 1, rows
    assert all(r[2] and ":" in r[2] for r in rows), rows  # the qualified run id of the first
