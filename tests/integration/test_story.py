"""The story of a slot and `holders --at`, on a real PostgreSQL with real `lockconsole run`
processes: a foreign psql session holds the billing lock over the slot (the journal sees it),
web-1's attempt skips, an operator force-releases the psql session (audited), then web-1,
web-2 and web-3 each run the slot one after another (once_per_slot off: a serial double run),
charging the same tenants with their run ids. `story` names every attempt, the foreign holder
with its seen-interval, the release, the duplicate keys and the verdict, in text, markdown and
JSON; `holders --at` answers between two samples."""

from __future__ import annotations

import json
import subprocess
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

from lockconsole.config.loader import load_config
from lockconsole.console.facade import Console

from tests.support import helpers
from tests.support.cli import run_cli

SLOT = datetime(2026, 11, 27, 2, 0, tzinfo=UTC)
HOSTILE = "psql | *bold* <b>"  # PostgreSQL itself turns control bytes of a name into '?'
SAID = "charged \x1b[2J\x1b]0;pwned\x07 tenants"  # the job's output: control bytes kept


@pytest.fixture
def incident(own_database, tmp_path, cli_env):
    """The night, played with real processes; yields (config path, env, samples)."""
    job = "nightly_billing"
    config = tmp_path / "lockconsole.toml"
    charge = (
        f"psql {own_database} -qc \"INSERT INTO invoices SELECT t, '2026-11', "
        '${LOCKCONSOLE_RUN_ID##*:} FROM generate_series(1, 4) t" && '
        "printf 'charged \\033[2J\\033]0;pwned\\007 tenants\\n'"
    )
    config.write_text(
        f'[databases.main]\nurl = "{own_database}"\n'
        f'[jobs.{job}]\nstrategy = "pg-session"\nschedule = "0 2 * * *"\n'
        "once_per_slot = false\n"
        f'command = ["sh", "-c", {json.dumps(charge)}]\n'
        '[jobs.nightly_billing.idempotency]\ntable = "invoices"\n'
        'key = ["tenant_id", "period"]\nrun_column = "run_id"\n',
        encoding="utf-8",
    )
    with psycopg.connect(own_database, autocommit=True) as conn:
        conn.execute("CREATE TABLE invoices (tenant_id int, period text, run_id bigint)")
    cfg = load_config(str(config))
    key = int(str(cfg.job(job).key))
    slot = SLOT.isoformat()
    samples: list[datetime | None] = []
    with Console(cfg, journal=True) as sampler:
        samples.append(sampler.snapshot(duplicates=False).taken_at)  # before the holder
        psql = subprocess.Popen(
            ["psql", own_database, "-qc", f"SELECT pg_advisory_lock({key}), pg_sleep(600)"],
            env={**cli_env, "PGAPPNAME": HOSTILE},
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            helpers.wait_for(
                lambda: [h for h in sampler.snapshot(duplicates=False).holders if h.granted],
                what="the psql holder seen",
            )
            samples.append(sampler.last.taken_at if sampler.last else None)
            code, out, err = run_cli(
                config, "run", job, "--slot", slot, "--instance", "web-1", "--json", env=cli_env
            )
            assert code == 3, (code, out, err)  # skipped: psql holds the lock
            (holder,) = sampler.find_holders(job=job)
            with Console(cfg) as operator:  # an operator's audited force-release
                released = operator.release(holder)
            assert released.status == "released", released
            psql.wait(30)
        finally:
            psql.kill()
        helpers.wait_for(
            lambda: not [h for h in sampler.snapshot(duplicates=False).holders if h.granted],
            what="the psql holder gone",
        )
        samples.append(sampler.last.taken_at if sampler.last else None)
        for instance in ("web-1", "web-2", "web-3"):
            code, out, err = run_cli(
                config, "run", job, "--slot", slot, "--instance", instance, env=cli_env
            )
            assert code == 0, (instance, code, out, err)
        sampler.snapshot(duplicates=False)
    yield config, cli_env, samples


def test_story_names_every_part_and_the_verdict(incident):
    config, env, _ = incident
    code, out, err = run_cli(
        config, "story", "nightly_billing", SLOT.isoformat(), "--json", env=env
    )
    assert code == 0, (code, out, err)
    story = json.loads(out)
    attempts = [(a["instance"], a["outcome"]) for a in story["attempts"]]
    assert attempts == [
        ("web-1", "skipped"),
        ("web-1", "succeeded"),
        ("web-2", "succeeded"),
        ("web-3", "succeeded"),
    ]
    (psql,) = story["holders"]
    assert psql["application"] == HOSTILE  # JSON keeps it exact
    assert psql["gone_by"] is not None and psql["first_seen"] < psql["gone_by"]
    (release,) = [a for a in story["audit"] if a["action"] == "release"]
    assert release["result"] == "released"
    assert story["status"] == "double_run"
    assert story["verdict"].startswith("double run: 3 executions on web-1, web-2, web-3")
    assert "outside lockconsole" in story["verdict"]
    run_ids = {a["id"] for a in story["attempts"] if a["outcome"] == "succeeded"}
    assert len(story["duplicates"]) == 4  # tenants 1-4, charged three times each
    for group in story["duplicates"]:
        assert group["count"] == 3 and set(group["run_ids"]) == run_ids
    assert {a["kind"] for a in story["alerts"]} == {"double_run"}
    assert story["unknown"] == []
    assert [o["output"] for o in story["outputs"]] == [SAID + "\n"] * 3
    kinds = [e["source"] for e in story["events"]]
    assert kinds.index("holder") < kinds.index("audit")  # seen, then released, in order


def test_story_text_and_markdown_keep_data_literal(incident):
    config, env, _ = incident
    code, text, err = run_cli(config, "story", "nightly_billing", SLOT.isoformat(), env=env)
    assert code == 0, (code, text, err)
    assert "\x1b" not in text and "\x07" not in text
    assert "\\x1b[2J" in text  # the control bytes shown, inert
    for line in ("verdict: double run", "web-2", "release", "duplicate keys carrying its run ids"):
        assert line in text
    code, md, err = run_cli(
        config, "story", "nightly_billing", SLOT.isoformat(), "--format", "markdown", env=env
    )
    assert code == 0, (code, md, err)
    assert "\x1b" not in md
    assert "\\| \\*bold\\* \\<b\\>" in md  # a pipe cannot split a row, nor a tag render
    assert "## Holders seen" in md and "## Audit" in md and "**Verdict:** double run" in md
    for row in (r for r in md.splitlines() if r.startswith("| ")):
        assert row.count(" | ") + 2 == row.count("|") - row.count("\\|"), row


def test_holders_at_a_moment_between_two_samples(incident):
    config, env, samples = incident
    _, seen, gone = samples
    code, out, err = run_cli(config, "holders", "--at", seen.isoformat(), "--json", env=env)
    assert code == 0, (code, out, err)
    (held,) = json.loads(out)["holders"]
    assert held["certainty"] == "held" and held["application"] == HOSTILE
    # between the last sample without it and the first with it: it may have held the lock
    after, first = (datetime.fromisoformat(held[k]) for k in ("seen_after", "first_seen"))
    between = after + (first - after) / 2
    code, out, err = run_cli(config, "holders", "--at", between.isoformat(), "--json", env=env)
    (maybe,) = json.loads(out)["holders"]
    assert maybe["certainty"] == "maybe" and maybe["id"] == held["id"]
    before = after - timedelta(milliseconds=1)
    code, out, err = run_cli(config, "holders", "--at", before.isoformat(), "--json", env=env)
    assert json.loads(out)["holders"] == []
    later = gone + timedelta(seconds=1)
    code, out, err = run_cli(config, "holders", "--at", later.isoformat(), "--json", env=env)
    assert json.loads(out)["holders"] == []
    code, out, err = run_cli(
        config,
        "holders",
        "--at",
        seen.isoformat(),
        "--job",
        "nightly_billing",
        "-o",
        "wide",
        env=env,
    )
    assert code == 0 and "held" in out and "psql" in out, (out, err)
    code, out, err = run_cli(config, "holders", "--at", "yesterday", env=env)
    assert (code, out) == (2, "") and err.count("\n") == 1, err
