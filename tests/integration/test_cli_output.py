"""Listings for scripts, through the real CLI on real PostgreSQL and MariaDB ledgers: plain
columns when piped (no box, no line wider than $COLUMNS), `-o wide|json|tsv`, `--no-headers`,
and cuts that never change a meaning (a TOOK of 10ms or 6.2s stays whole at 80 columns)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest
from rich.cells import cell_len

from lockconsole.cli.main import build_parser
from lockconsole.cli.output import LISTINGS
from lockconsole.model.errors import UsageError
from lockconsole.model.keys import name_to_int64

from tests.support.cli import CliResult, run_cli
from tests.support.helpers import mysql_connect
from tests.support.hostile import corpus, no_nul, raw_controls
from tests.support.settings import ROOT

BOX = re.compile("[\u2500-\u257f]")  # box drawing
LONG_MESSAGE = "the invoice export wrote every tenant's file and then " * 6
ESCAPE = re.compile(r"\\(\\|t|n|r|x[0-9a-f]{2}|u[0-9a-f]{4}|U[0-9a-f]{8})")


def untsv(field: str) -> str:
    """A TSV field read back: this test's own reading of the escapes the README names."""
    named = {"\\": "\\", "t": "\t", "n": "\n", "r": "\r"}
    return ESCAPE.sub(lambda m: named.get(m[1]) or chr(int(m[1][1:], 16)), field)


@dataclass
class World:
    config: Path
    env: dict[str, str]
    jobs: dict[str, str]  # role -> job name
    hostile: list[str]  # the strings placed in run instances and messages
    dialect: str

    def cli(self, *words: str, columns: int = 200) -> CliResult:
        return run_cli(self.config, *words, env=dict(self.env, COLUMNS=str(columns)))

    def listings(self) -> dict[str, tuple[str, ...]]:
        """Each listing command with the arguments that make it list this world's rows."""
        return {
            "locks": ("locks", "--job", self.jobs["lock"]),
            "history": ("history", "--job", self.jobs["runs"]),
            "audit": ("audit", "--job", self.jobs["runs"]),
            "check": ("check",),
            "dupes": ("dupes", self.jobs["dupes"]),
        }


def _mysql_database(mysql_url: str) -> Iterator[str]:
    name = f"lc_out_{uuid.uuid4().hex[:8]}"
    with mysql_connect(mysql_url).cursor() as cur:
        cur.execute(f"create database {name} character set utf8mb4")
    try:
        yield mysql_url.rsplit("/", 1)[0] + f"/{name}"
    finally:
        with mysql_connect(mysql_url).cursor() as cur:
            cur.execute(f"drop database if exists {name}")


@pytest.fixture(params=["postgresql", "mysql"], scope="module")
def world(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[World]:
    from lockconsole.backends.ledger.store import Ledger
    from lockconsole.config.urls import parse_url
    from lockconsole.model.jobs import Database, Run

    uid = uuid.uuid4().hex[:8]
    dialect = request.param
    folder = tmp_path_factory.mktemp(f"out_{dialect}")
    if dialect == "postgresql":
        pg_url = request.getfixturevalue("pg_url")
        name = f"lc_out_{uid}"
        with psycopg.connect(pg_url, autocommit=True) as admin:
            admin.execute(f"create database {name}")
        url, drop = pg_url.rsplit("/", 1)[0] + f"/{name}", name
        strategy = "pg-session"
    else:
        databases = _mysql_database(request.getfixturevalue("mysql_url"))
        url, drop = next(databases), None
        strategy = "mysql"
    jobs = {"runs": f"runs_{uid}", "lock": f"lock_{uid}", "dupes": f"dupes_{uid}"}
    folder.joinpath("lockconsole.toml").write_text(
        f'[databases.main]\nurl = "{url}"\n'
        + "".join(
            f'[jobs.{j}]\nstrategy = "{strategy}"\ncommand = ["true"]\n' for j in jobs.values()
        )
        + f'[jobs.{jobs["dupes"]}.idempotency]\ntable = "inv_{uid}"\nkey = ["tenant", "period"]\n',
        encoding="utf-8",
    )
    env = dict(os.environ, NO_COLOR="1", PYTHONPATH=str(ROOT), XDG_CONFIG_HOME=str(folder / "x"))
    env.pop("LOCKCONSOLE_CONFIG", None)
    # an idempotency table with 40 duplicate groups, made in one statement
    rows = (
        "select 'tenant-' || (g % 40), '2026-11' from generate_series(1, 120) g"
        if dialect == "postgresql"
        else "select concat('tenant-', seq % 40), '2026-11' from seq_1_to_120"
    )
    serial = "serial" if dialect == "postgresql" else "int auto_increment"
    ddl = f"create table inv_{uid} (id {serial} primary key, tenant text, period varchar(20))"
    fill = f"insert into inv_{uid} (tenant, period) {rows}"
    if dialect == "postgresql":
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(ddl)
            conn.execute(fill)
    else:
        with mysql_connect(url).cursor() as cur:
            cur.execute(ddl)
            cur.execute(fill)
    hostile = [no_nul(text) for _, text, _ in corpus() if no_nul(text)]
    now = datetime.now(UTC).replace(microsecond=0)
    ledger_db = Database("main", parse_url(url))
    with Ledger(ledger_db) as ledger:
        ledger.create_schema()

        def run(i: int, took: timedelta, **fields: object) -> None:
            slot = now - timedelta(minutes=10 + i)
            values: dict = dict(
                job=jobs["runs"], slot=slot, instance="web-1", host="host", pid=4242,
                trigger="scheduled", outcome="succeeded", started_at=slot,
                finished_at=slot + took, exit_code=0, message=None,
            )  # fmt: skip
            ledger.record(Run(**(values | fields)))

        run(0, timedelta(milliseconds=10), message="quick")
        run(1, timedelta(seconds=6.2), outcome="failed", exit_code=1, message=LONG_MESSAGE)
        for i, text in enumerate(hostile, start=2):  # untrusted text where a ledger keeps it
            run(i, timedelta(seconds=1), instance=text[:200], message=text, actor=text[:100])
    # a manual run writes an audit row: the audit listing has a row of this world
    manual = subprocess.run(
        [sys.executable, "-m", "lockconsole", "--config", str(folder / "lockconsole.toml"),
         "run", jobs["runs"], "--manual", "--", "true"],
        capture_output=True, text=True, env=env, timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    assert manual.returncode == 0, manual.stderr
    # someone holds the lock job's lock, so `locks` has a row
    if dialect == "postgresql":
        holder = psycopg.connect(url, autocommit=True)
        holder.execute("select pg_advisory_lock(%s)", (name_to_int64(jobs["lock"]),))
    else:
        holder = mysql_connect(url)
        with holder.cursor() as cur:
            cur.execute("select get_lock(%s, 0)", (jobs["lock"],))
    try:
        yield World(folder / "lockconsole.toml", env, jobs, hostile, dialect)
    finally:
        holder.close()
        if drop:
            with psycopg.connect(request.getfixturevalue("pg_url"), autocommit=True) as admin:
                admin.execute(f"drop database {drop} with (force)")
        else:
            next(databases, None)


def _all(world: World, calls: list[tuple[tuple[str, ...], int]]) -> list[CliResult]:
    """The CLI calls, three at a time (each is its own process)."""
    with ThreadPoolExecutor(3) as pool:
        return list(pool.map(lambda c: world.cli(*c[0], columns=c[1]), calls))


def test_piped_listings_are_plain_columns_within_columns(world: World) -> None:
    """Every listing, piped at 80 and at 200 columns, default and wide: plain columns, no box
    drawing, no line wider than $COLUMNS, no raw control character; wide has more columns."""
    calls = [
        (words + extra, columns)
        for words in world.listings().values()
        for columns in (80, 200)
        for extra in ((), ("-o", "wide"))
    ]
    done = _all(world, calls)
    for (words, columns), got in zip(calls, done, strict=True):
        assert got.returncode in (0, 1), (words, got.stderr)  # check: 1, there are alerts
        assert "Traceback" not in got.stderr
        lines = got.stdout.splitlines()
        assert lines, (words, got.stderr)
        assert not BOX.search(got.stdout), (words, got.stdout)
        too_long = [line for line in lines if cell_len(line) > columns]
        assert not too_long, (words, columns, too_long)
        assert not raw_controls(got.stdout + got.stderr), (words, raw_controls(got.stdout))
        assert lines[0].split()[0].isupper(), (words, lines[0])  # the header comes first
        if words[0] in ("locks", "dupes"):  # what is not a row goes to stderr
            said = "read from" if words[0] == "locks" else "duplicate groups"
            assert said in got.stderr and said not in got.stdout, (words, got.stderr)
    by_call = dict(zip(calls, done, strict=True))
    steady = [w for w in world.listings().values() if w[0] not in ("locks", "check")]
    tsv = {w: world.cli(*w, "-o", "tsv").stdout.splitlines() for w in steady}
    for words in steady:  # never wrapped: one row a line at 80 columns too, as many as TSV's
        for columns in (80, 200):
            for extra in ((), ("-o", "wide")):
                lines = by_call[(words + extra, columns)].stdout.splitlines()
                assert len(lines) == len(tsv[words]), (words, extra, columns, lines)
    for words in world.listings().values():
        if words[0] == "dupes":  # its three columns are all there is
            continue
        plain = by_call[(words, 200)].stdout.splitlines()[0].split()
        wide = by_call[(words + ("-o", "wide"), 200)].stdout.splitlines()[0].split()
        assert set(plain) < set(wide), (words, plain, wide)


def test_took_ids_and_times_are_never_cut_at_80_columns(world: World) -> None:
    got = world.cli("history", "--job", world.jobs["runs"], "-o", "json")
    runs = {r["message"]: r for r in json.loads(got.stdout)["runs"]}
    table = world.cli("history", "--job", world.jobs["runs"], columns=80).stdout.splitlines()
    header = table[0].split()
    assert header[:2] == ["ID", "JOB"] and {"SLOT", "OUTCOME", "TOOK"} <= set(header), header
    for message, took in (("quick", "10ms"), (LONG_MESSAGE, "6.2s")):
        run = runs[message]
        [line] = [row for row in table if row.startswith(run["run_id"] + " ")]
        assert f"   {took}   " in line or line.endswith(f"   {took}"), (took, line)
        assert run["slot"][:19].replace("T", " ") in line, line  # the slot, whole
    [cut] = [row for row in table if row.startswith(runs[LONG_MESSAGE]["run_id"] + " ")]
    assert cut.endswith("…") and len(cut) <= 80, cut  # only the message is cut, and it says so
    shown = cut.rsplit("   ", 1)[1].removesuffix("…")
    assert LONG_MESSAGE.startswith(shown) and len(shown) >= 7, shown


def test_tsv_reads_back_to_the_rows_with_hostile_values(world: World) -> None:
    words = ("history", "--job", world.jobs["runs"], "--limit", "500")
    doc = json.loads(world.cli(*words, "--json").stdout)
    got = world.cli(*words, "-o", "tsv", columns=80)
    assert got.returncode == 0, got.stderr
    fields_only = got.stdout.replace("\t", " ")  # a tab separates fields: none is in a value
    assert not raw_controls(fields_only), raw_controls(fields_only)
    lines = got.stdout.split("\n")
    assert lines[-1] == "" and all(lines[:-1])  # one row a line, nothing else
    header, *rows = (line.split("\t") for line in lines[:-1])
    assert header == ["ID", "JOB", "SLOT", "INSTANCE", "OUTCOME", "TOOK", "MESSAGE",
                      "TRIGGER", "STARTED", "EXIT"]  # fmt: skip
    assert len(rows) == len(doc["runs"]) and all(len(r) == len(header) for r in rows)
    for row, run in zip(rows, doc["runs"], strict=True):
        fields = [untsv(f) for f in row]
        assert fields[0] == run["run_id"] and fields[1] == run["job"]
        assert fields[3] == run["instance"] and fields[4] == run["outcome"]
        assert fields[6] == (run["message"] or "")
        by = "" if run["actor"] is None else f" by {run['actor']}"
        assert fields[7] == run["trigger"] + by and fields[9] == str(run["exit_code"])
    messages = {r["message"] for r in doc["runs"]}
    kept = {t for t in world.hostile if len(t) < 2000}  # the ledger cuts the 10 KB one
    if world.dialect == "mysql":  # MariaDB keeps what utf8mb4 can: the terminal escapes at least
        kept = {t for t in kept if "\x1b" in t}
    assert kept and kept <= messages


def test_no_headers_drops_exactly_the_header(world: World) -> None:
    calls = [
        (words + fmt + flag, 80)
        for words in world.listings().values()
        for fmt in ((), ("-o", "wide"), ("-o", "tsv"))
        for flag in ((), ("--no-headers",))
    ]
    done = dict(zip(calls, _all(world, calls), strict=True))
    for words in world.listings().values():
        for fmt in ((), ("-o", "wide"), ("-o", "tsv")):
            full = done[(words + fmt, 80)].stdout.splitlines()
            bare = done[(words + fmt + ("--no-headers",), 80)].stdout.splitlines()
            if words[0] in ("locks", "check"):  # ages and live state may move between calls
                assert len(bare) == len(full) - 1, (words, fmt, full, bare)
                assert [r.split()[0] for r in bare] == [r.split()[0] for r in full[1:]]
            else:
                assert bare == full[1:], (words, fmt)
            assert full[0].split()[0].isupper() and bare[0] != full[0], (words, fmt)


def test_every_listings_json_has_a_schema_and_bad_output_is_one_line(world: World) -> None:
    calls = [
        (words + fmt, 200)
        for words in world.listings().values()
        for fmt in (("--json",), ("-o", "json"), ("-o", "yaml"))
    ]
    done = dict(zip(calls, _all(world, calls), strict=True))
    for words in world.listings().values():
        alias, named = (
            json.loads(done[(words + f, 200)].stdout) for f in (("--json",), ("-o", "json"))
        )
        assert alias["schema"] == named["schema"] == 1, words
        assert list(alias) == list(named), words  # the same document
        if words[0] in ("history", "audit", "dupes"):
            assert alias == named, words
        bad = done[(words + ("-o", "yaml"), 200)]
        assert bad.returncode == 2 and bad.stdout == "", (words, bad.stdout)
        assert len(bad.stderr.strip().splitlines()) == 1 and "Traceback" not in bad.stderr


def test_every_listing_command_takes_output_and_no_headers() -> None:
    """Walk the real parser: each listing has -o and --no-headers (and only listings do)."""
    parser = build_parser()
    [sub] = [a for a in parser._actions if a.dest == "command"]
    with_headers = set()
    for name, command in sub.choices.items():
        options = {o for a in command._actions for o in a.option_strings}
        if "--no-headers" in options:
            with_headers.add(name)
            assert {"-o", "--output", "--json"} <= options, name
    assert with_headers == set(LISTINGS)
    for name in LISTINGS:
        words = {"dupes": [name, "job"], "holders": [name, "--at", "1h"]}.get(name, [name])
        args = parser.parse_args([*words, "-o", "tsv", "--no-headers"])
        assert (args.output, args.no_headers) == ("tsv", True)
        with pytest.raises(UsageError):
            parser.parse_args([*words, "-o", "yaml"])


def test_tsv_cells_read_back_exactly_and_hold_no_control_character() -> None:
    from lockconsole.text.safe import tsv_cell

    for _, text, _ in corpus():
        cell = tsv_cell(text)
        assert "\t" not in cell and "\n" not in cell and not raw_controls(cell), cell[:80]
        assert untsv(cell) == text
    assert tsv_cell("a\\x1b") == "a\\\\x1b"  # a backslash in the data is not an escape


def test_layout_cuts_free_text_only_and_leaves_columns_out_first() -> None:
    from lockconsole.cli.columns import Column, layout

    columns = (
        Column("ID"),
        Column("NAME", cut=True),
        Column("TOOK"),
        Column("NOTE", cut=True, rank=1),
        Column("HOST", cut=True, rank=2),
    )
    table = [
        ["ID", "NAME", "TOOK", "NOTE", "HOST"],
        ["main:1", "x" * 40, "10ms", "y" * 30, "web-1"],
    ]
    assert layout(columns, table, 200, 3) == [(0, 6), (1, 40), (2, 4), (3, 30), (4, 5)]
    # narrower: the free text gives way, the widest first, the id and the duration never do
    at_80 = dict(layout(columns, table, 80, 3))
    assert (at_80[0], at_80[2]) == (6, 4) and sum(at_80.values()) + 3 * 4 <= 80
    # narrower still: HOST (the highest rank) is left out, then NOTE, before a value is cut
    assert [i for i, _ in layout(columns, table, 40, 3)] == [0, 1, 2, 3]
    assert layout(columns, table, 24, 3) == [(0, 6), (1, 8), (2, 4)]
    # what is left means something: wider than asked rather than cut
    assert layout(columns, table, 10, 3) == [(0, 6), (1, 8), (2, 4)]
