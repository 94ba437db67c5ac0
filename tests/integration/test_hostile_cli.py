"""Every CLI view on hostile data (tests/support/hostile.py puts it in real places): the same
exit code as on plain data, no traceback, no raw control character in the text output, and
`--json` keeping the original strings."""

from __future__ import annotations

import csv
import json
import os
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.cli import CliResult, run_cli
from tests.support.hostile import World, hostile_world, raw_controls
from tests.support.settings import ROOT


@pytest.fixture(scope="module")
def worlds(pg_url: str, mysql_url: str, tmp_path_factory: Any) -> Iterator[tuple[World, World]]:
    """The hostile world and a plain one of the same shape (for the exit codes to compare)."""
    uid = uuid.uuid4().hex[:10]
    with (
        hostile_world(pg_url, mysql_url, uid, tmp_path_factory.mktemp("hostile")) as bad,
        hostile_world(
            pg_url, mysql_url, uid[::-1], tmp_path_factory.mktemp("plain"), benign=True
        ) as plain,
    ):
        yield bad, plain


def cli(world: World, *args: str) -> CliResult:
    env = dict(os.environ, NO_COLOR="1", PYTHONPATH=str(ROOT))
    env.pop("LOCKCONSOLE_CONFIG", None)
    return run_cli(world.config, *args, env=env)


def views(world: World, tmp: Path) -> list[tuple[str, ...]]:
    dupes, lease = world.jobs["dupes"], world.jobs["lease"]
    group = world.strings[6]  # the clear-screen string: an argument may carry it too
    pid = next(iter(world.pg_pids))
    return [
        ("locks",),
        ("locks", "--job", lease),
        ("check",),
        ("check", "--no-duplicates"),
        ("history", "--limit", "200"),
        ("history", "--job", world.jobs["ledger"]),
        ("dupes", dupes),
        ("dupes", dupes, "--page-size", "5", "--page", "1"),
        ("dupes", dupes, "--group", group, group[:100]),
        ("dupes", dupes, "--csv", str(tmp / f"{world.jobs['dupes']}.csv")),
        ("release", "--pid", str(pid)),  # no terminal to confirm on: refused
        ("release", "--pid", "2147483000"),  # nobody: not released
        ("release", "--job", world.jobs["printer"]),  # holds nothing
        ("--read-only", "release", "--pid", str(pid), "--yes"),
        ("config",),
    ]


def test_text_views_show_hostile_data_inertly(worlds: tuple[World, World], tmp_path) -> None:
    bad, plain = worlds
    for args, plain_args in zip(views(bad, tmp_path), views(plain, tmp_path), strict=True):
        got, want = cli(bad, *args), cli(plain, *plain_args)
        shown = got.stdout + got.stderr
        assert got.returncode == want.returncode, (args, got.stderr[-2000:], want.stderr[-2000:])
        assert "Traceback" not in shown, (args, got.stderr[-3000:])
        assert not raw_controls(shown), (args, raw_controls(shown))
    # the data is there, escaped, not interpreted
    locks = cli(bad, "locks").stdout
    assert "\\x1b[2J" in locks and "[bold red]PWNED[/bold red]" in locks
    assert "\\u202egpj.exe\\u202c" in locks
    for pid in bad.pg_pids:  # every session's pid is still in the table
        assert str(pid) in locks


def test_json_views_keep_the_original_strings(worlds: tuple[World, World]) -> None:
    bad, plain = worlds
    for args in [
        ("locks",),
        ("check",),
        ("history", "--limit", "200"),
        ("dupes", bad.jobs["dupes"]),
        ("config",),
    ]:
        got = cli(bad, *args, "--json")
        want = cli(
            plain, *[a.replace(bad.jobs["dupes"], plain.jobs["dupes"]) for a in args], "--json"
        )
        assert got.returncode == want.returncode, (args, got.stderr[-2000:])
        assert "Traceback" not in got.stderr
        json.loads(got.stdout)  # one JSON document
    holders = json.loads(cli(bad, "locks", "--json").stdout)["holders"]
    keys = {h["key"] for h in holders}
    # MariaDB keeps a lock name as a utf8mb3 C string: a NUL ends it, emoji become '?'
    kept = {n for n in bad.my_names if "\0" not in n and all(ord(c) < 0x10000 for c in n)}
    assert kept <= keys, "every GET_LOCK name, exactly as the server holds it"
    assert sum(h["database"] == "my" for h in holders) >= len(bad.my_names)
    assert set(bad.lease_names) <= keys, "every lease row, exactly"
    lease_by = {h["locked_by"] for h in holders if h["kind"] == "lease"}
    assert bad.strings[6] in lease_by
    queries = {h["pid"]: h["query"] for h in holders if h["pid"] in bad.pg_pids}
    assert any(q and "\x1b[2J" in q for q in queries.values()), "query text kept raw in JSON"
    runs = json.loads(cli(bad, "history", "--json", "--job", bad.jobs["ledger"]).stdout)["runs"]
    messages = {r["message"] for r in runs if r["job"] == bad.jobs["ledger"]}
    assert bad.strings[7] in messages and bad.strings[17] in messages


def test_csv_export_neutralises_formulas(worlds: tuple[World, World], tmp_path) -> None:
    bad, _ = worlds
    out = tmp_path / "dupes.csv"
    got = cli(bad, "dupes", bad.jobs["dupes"], "--csv", str(out))
    assert got.returncode == 0, got.stderr
    cells = [c for row in csv.reader(out.open(encoding="utf-8")) for c in row]
    formulas = [c for c in cells if c[:1] in ("=", "+", "-", "@")]
    assert not formulas, formulas
    assert '\'=HYPERLINK("http://evil.example","x")' in cells
    assert "'@SUM(1+1)" in cells
    assert bad.strings[6] in cells, "other values are exported exactly"
