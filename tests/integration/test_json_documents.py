"""Every command's `--json` document has exactly the top-level keys the README's table names,
`schema` first, run against a real PostgreSQL database of the test's own."""

from __future__ import annotations

import json
import re
import subprocess
import sys

from tests.support.cli import run_cli
from tests.support.settings import ROOT


def _readme_keys() -> dict[str, set[str]]:
    """command -> the keys its row of the README's table names."""
    text = (ROOT / "README.md").read_text()
    section = text.split("### JSON documents", 1)[1].split("\n## ", 1)[0]
    found: dict[str, set[str]] = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 2 and cells[0].startswith("`"):
            found[cells[0].strip("`").removesuffix(" --json")] = set(
                re.findall(r"`([a-z_]+)`", cells[1])
            )
    return found


def test_every_json_document_has_the_keys_the_readme_names(own_database, write_config, cli_env):
    config = write_config(
        f'[databases.main]\nurl = "{own_database}"\n[jobs.doc_job]\nstrategy = "pg-session"\n'
        'command = ["sh", "-c", "echo talkative; echo more"]\n'
    )

    def document(*words: str) -> dict[str, object]:
        out = run_cli(config, *words, env=cli_env, timeout=60)
        assert out.returncode in (0, 1, 5), (words, out.stderr)  # 5: a read ran out of time
        parsed = json.loads(out.stdout)  # nothing but the document on stdout
        assert isinstance(parsed, dict) and next(iter(parsed)) == "schema", words
        return parsed

    ran = document("run", "doc_job", "--json")
    commands = {
        "run": ran,
        "locks": document("locks", "--json"),
        "history": document("history", "--json"),
        "check": document("check", "--json", "--no-duplicates"),
        "audit": document("audit", "--json"),
        "config": document("config", "--json"),
        "pause": document("pause", "doc_job", "--note", "docs", "--json"),
        "resume": document("resume", "doc_job", "--json"),
        "output": document("output", str(ran["run_id"]), "--json"),
    }
    expected = _readme_keys()
    assert set(expected) == set(commands), "the README's table names every command tested"
    for command, doc in commands.items():
        assert set(doc) == expected[command], (command, sorted(doc))
    assert commands["output"]["found"] is True and "talkative" in str(commands["output"]["output"])


def test_config_json_shows_every_field_of_a_job(write_config, cli_env):
    from dataclasses import fields

    from lockconsole.config.loader import load_config
    from lockconsole.model.jobs import Job

    config = write_config(
        '[databases.main]\nurl = "postgresql://app:hunter2@db.example:5432/app"\n'
        '[jobs.billing]\nstrategy = "lease"\nschedule = "0 2 * * *"\nlease_table = "leases"\n'
        "stop_grace = 3\nwatchdog_interval = 1.5\nlock_check_timeout = 4\nonce_per_slot = false\n"
        'command = ["bill"]\nmin_hold = "2s"\n'
        '[jobs.billing.idempotency]\ntable = "invoices"\nkey = ["tenant_id", "period"]\n'
    )
    out = subprocess.run(
        [sys.executable, "-m", "lockconsole", "--config", str(config), "config", "--json"],
        capture_output=True, text=True, env=cli_env, timeout=60,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert "hunter2" not in out.stdout
    shown = json.loads(out.stdout)["jobs"]["billing"]
    job = load_config(str(config)).job("billing")
    for spec in fields(Job):
        if spec.name in ("name", "key"):
            continue
        name = f"{spec.name}_s" if spec.name in ("max_duration", "min_hold") else spec.name
        assert name in shown, f"config --json leaves out {spec.name}"
    assert (shown["lease_table"], shown["stop_grace"], shown["watchdog_interval"]) == (
        "leases", 3.0, 1.5,
    )  # fmt: skip
    assert (shown["lock_check_timeout"], shown["once_per_slot"]) == (4.0, False)
    assert (shown["min_hold_s"], shown["max_duration_s"]) == (2.0, 3600.0)  # a lease's default
    assert shown["idempotency"] == {
        "table": "invoices", "key": ["tenant_id", "period"], "run_column": None,
    }  # fmt: skip
    assert shown["command"] == ["bill"] and shown["key"] == str(job.key)
