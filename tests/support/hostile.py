"""Hostile strings (tests/data/hostile_strings.json) placed into real places on real servers.

    with hostile_world(pg_url, mysql_url, uid, folder) as world: ...

puts every string of the corpus into: PostgreSQL sessions' application_name and query text
(each session holds an advisory lock), MariaDB GET_LOCK names and the connection's
program_name attribute, a ShedLock lease row's name and locked_by, an idempotency table's key
values (in duplicate groups), ledger messages and instances, a job whose command prints the
corpus on stdout and stderr, and a server error message (a database name the server quotes
back). `benign=True` builds the same world with plain strings: the exit codes to compare with.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from urllib.parse import quote

import psycopg
from psycopg import sql

from tests.support.helpers import mysql_connect
from tests.support.settings import DATA

STRINGS = DATA / "hostile_strings.json"
# Bytes that would act on a terminal: C0 (but the line break), DEL, C1, bidi controls.
RAW_CONTROL = re.compile(
    r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u200b-\u200f\u202a-\u202e\u2066-\u2069\ufeff]"
)


def corpus() -> list[tuple[str, str, bool]]:
    """(name, text, has a NUL) for every string of the corpus, long ones built out."""
    out = []
    for item in json.loads(STRINGS.read_text(encoding="utf-8"))["strings"]:
        text = item["text"] if "text" in item else item["repeat"] * item["times"]
        out.append((item["name"], text, bool(item.get("nul"))))
    return out


def one_of_each_kind() -> list[int]:
    """The index of one corpus string of each `kind` (the strings the console escapes the same
    way): the longest of the kind, which has the most of it to show."""
    best: dict[str, tuple[int, int]] = {}
    for i, item in enumerate(json.loads(STRINGS.read_text(encoding="utf-8"))["strings"]):
        size = len(item["text"]) if "text" in item else len(item["repeat"]) * item["times"]
        if item["kind"] not in best or size > best[item["kind"]][0]:
            best[item["kind"]] = (size, i)
    return sorted(i for _, i in best.values())


def no_nul(text: str) -> str:
    return text.replace("\0", "")


def raw_controls(text: str) -> list[str]:
    """Every raw control character in `text` (line breaks allowed), for an assertion message."""
    return sorted({repr(m.group()) for m in RAW_CONTROL.finditer(text)})


@dataclass
class World:
    config: Path
    strings: list[str]
    jobs: dict[str, str] = field(default_factory=dict)  # role -> job name
    pg_pids: dict[int, str] = field(default_factory=dict)  # pid -> its string
    my_names: list[str] = field(default_factory=list)  # GET_LOCK names held
    lease_names: list[str] = field(default_factory=list)


def _pg_sessions(stack: ExitStack, pg_url: str, strings: list[str], base: int) -> dict[int, str]:
    pids = {}
    for i, text in enumerate(strings):
        app_name = no_nul(text).encode("utf-8")[:60].decode("utf-8", "ignore")
        conn = psycopg.connect(pg_url, autocommit=True, application_name=app_name)
        stack.callback(conn.close)
        # the session's last query carries the string: pg_stat_activity shows it
        conn.execute(
            sql.SQL("select pg_advisory_lock({}), {}").format(base + i, sql.Literal(no_nul(text)))
        )
        pids[conn.info.backend_pid] = text
    return pids


def mysql_names(strings: list[str], uid: str) -> list[str]:
    """GET_LOCK names are server-wide and at most 64 characters: each one made unique."""
    return [f"{uid[:4]}{i:02d}" + text[: 64 - 6] for i, text in enumerate(strings)]


def toml_string(text: str) -> str:
    """A TOML basic string holding `text` exactly (controls escaped as TOML wants)."""
    body = json.dumps(text, ensure_ascii=False)[1:-1].replace("\x7f", "\\u007f")
    return f'"{body}"'


def _mysql_locks(stack: ExitStack, mysql_url: str, strings: list[str], uid: str) -> list[str]:
    names = mysql_names(strings, uid)
    for text, name in zip(strings, names, strict=True):
        conn = mysql_connect(mysql_url, program_name=no_nul(text)[:200])
        stack.callback(conn.close)
        with conn.cursor() as cur:
            cur.execute("select get_lock(%s, 0)", (name,))
            assert cur.fetchone()[0] == 1
    return names


@contextmanager
def hostile_world(
    pg_url: str, mysql_url: str, uid: str, folder: Path, *, benign: bool = False
) -> Iterator[World]:
    """Every place filled with the corpus (or plain strings); closed and dropped on exit."""
    from lockconsole.backends.lease.table import lease_table
    from lockconsole.backends.ledger.store import Ledger
    from lockconsole.backends.sa import engine_for
    from lockconsole.config.urls import parse_url
    from lockconsole.model.jobs import Database, Run

    strings = (
        [f"plain text {i}" for i in range(len(corpus()))] if benign else [t for _, t, _ in corpus()]
    )
    inv, lease = f"inv_h{uid}", f"shedlock_h{uid}"
    printer = folder / "printer.py"
    printer.write_text(
        "import json, sys\n"
        f"strings = json.load(open({str(folder / 'strings.json')!r}))\n"
        "for s in strings:\n"
        "    print(s.replace('\\n', ' '))\n"
        "    print('err:', s.replace('\\n', ' '), file=sys.stderr)\n"
        "sys.exit(3)\n",
        encoding="utf-8",
    )
    (folder / "strings.json").write_text(json.dumps(strings), encoding="utf-8")
    # a database name the server quotes back in its error message
    bad_db = quote(no_nul(strings[6] + strings[9]), safe="")
    jobs = {
        "dupes": f"dupes_{uid}",
        "lease": f"lease_{uid}",
        "printer": f"printer_{uid}",
        "ledger": f"ledger_{uid}",
        "bad": f"bad_{uid}",
    }
    # the operator maps the app's GET_LOCK names to jobs: each name is then looked up
    my_jobs = "\n".join(
        f'[jobs.my{i}_{uid}]\ndatabase = "my"\nstrategy = "mysql"\nkey = {toml_string(name)}\n'
        'command = ["true"]'
        for i, name in enumerate(mysql_names(strings, uid))
    )
    folder.joinpath("lockconsole.toml").write_text(
        f"""
[lockconsole]
ledger_database = "pg"

[databases.pg]
url = "{pg_url}"
[databases.my]
url = "{mysql_url}"
[databases.bad]
url = "{pg_url.rsplit("/", 1)[0]}/{bad_db}"

[jobs.{jobs["dupes"]}]
database = "pg"
command = ["true"]
[jobs.{jobs["dupes"]}.idempotency]
table = "{inv}"
key = ["tenant", "period"]

[jobs.{jobs["lease"]}]
database = "pg"
strategy = "lease"
lease_table = "{lease}"
command = ["true"]

[jobs.{jobs["printer"]}]
database = "pg"
schedule = "0 2 * * *"
command = ["{sys.executable}", "{printer}"]

[jobs.{jobs["ledger"]}]
database = "pg"
schedule = "* * * * *"
command = ["true"]

{my_jobs}

[jobs.{jobs["bad"]}]
database = "bad"
command = ["true"]
""",
        encoding="utf-8",
    )
    pg = Database("pg", parse_url(pg_url))
    engine = engine_for(pg.url)
    with ExitStack() as stack:
        stack.callback(engine.dispose)
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(f"create table {inv} (id serial primary key, tenant text, period text)")
            stack.callback(_drop, pg_url, inv)
            for text in strings:
                for _ in range(2):  # a duplicate group per string
                    conn.execute(
                        f"insert into {inv} (tenant, period) values (%s, %s)",
                        (no_nul(text), no_nul(text)[:100]),
                    )
        table = lease_table(lease, "postgresql")
        table.create(engine)
        stack.callback(_drop, pg_url, lease)
        now = datetime.now(UTC)
        names = [f"{i:02d}" + no_nul(t)[:62] for i, t in enumerate(strings)]  # varchar(64)
        with engine.begin() as conn:
            conn.execute(
                table.insert(),
                [
                    {
                        "name": n,
                        "lock_until": now + timedelta(hours=1),
                        "locked_at": now,
                        "locked_by": no_nul(t)[:255],
                    }
                    for n, t in zip(names, strings, strict=True)
                ],
            )
        stack.callback(_forget_runs, pg_url, jobs["ledger"])
        with Ledger(pg) as ledger:
            for i, text in enumerate(strings):
                slot = (now - timedelta(minutes=2 + i)).replace(second=0, microsecond=0)
                ledger.record(
                    Run(
                        jobs["ledger"],
                        slot,
                        no_nul(text)[:200] or "x",
                        "host",
                        4242,
                        "scheduled",
                        "failed",
                        slot,
                        slot + timedelta(seconds=1),
                        1,
                        no_nul(text),
                    )
                )
        world = World(folder / "lockconsole.toml", strings, jobs, lease_names=names)
        base = int(uid[:6], 16) * 100
        world.pg_pids = _pg_sessions(stack, pg_url, strings, base)
        world.my_names = _mysql_locks(stack, mysql_url, strings, uid)
        yield world


def _forget_runs(pg_url: str, job: str) -> None:
    from lockconsole.backends.ledger.schema import TABLE

    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"delete from {TABLE} where job = %s", (job,))


def _drop(pg_url: str, table: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(f"drop table if exists {table}")


def cells(text: str, start: int, end: int) -> str:
    """The characters of `text` in terminal cells [start, end) (wide characters count two)."""
    from rich.cells import get_character_cell_size

    out, at = [], 0
    for ch in text:
        width = get_character_cell_size(ch)
        if at >= start and at + width <= end:
            out.append(ch)
        at += width
    return "".join(out)
