"""A secret scan: every command and every console screen, on the good paths and the error paths
(unreachable server, wrong password, failing duplicates scan), with the password in the URL's
user-info, in ?password= and in ?sslpassword=, for PostgreSQL and MySQL. The password is found
nowhere: not in the output, the logs, the CSV, the ledger, the audit or the screenshots."""

from __future__ import annotations

import asyncio
import os
import socket
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from urllib.parse import quote

import psycopg
import pytest
from textual.widgets import RichLog

from lockconsole.config.loader import load_config
from lockconsole.console.facade import Console
from lockconsole.model.keys import name_to_int64
from lockconsole.tui.app import LockConsoleApp

from tests.support.cli import run_cli
from tests.support.settings import ROOT

SECRET = f"Sekr3t_{uuid.uuid4().hex[:8]}"


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def with_secret(url: str, where: str) -> str:
    """`url` carrying SECRET in its user-info, or in ?password=, or in ?sslpassword=."""
    scheme, rest = url.split("://", 1)
    userinfo, _, hostpart = rest.rpartition("@")
    if where == "userinfo":
        return f"{scheme}://{userinfo.split(':')[0]}:{quote(SECRET)}@{hostpart}"
    sep = "&" if "?" in url else "?"
    return f"{url}{sep}{where}={quote(SECRET)}"


def cases(pg_url: str, mysql_url: str) -> list[tuple[str, str]]:
    down_pg = f"postgresql://postgres@127.0.0.1:{closed_port()}/nowhere"
    down_my = f"mysql://root@127.0.0.1:{closed_port()}/nowhere"
    out = []
    for where in ("userinfo", "password", "sslpassword"):
        out.append((f"pg-{where}", with_secret(pg_url, where)))  # trust auth: it connects
        out.append((f"pg-down-{where}", with_secret(down_pg, where)))
        # MySQL's own name for a key's password (libpq's sslpassword is refused on a mysql URL)
        mine = "ssl_key_password" if where == "sslpassword" else where
        out.append((f"my-down-{where}", with_secret(down_my, mine)))
    out.append(("my-wrong-userinfo", with_secret(mysql_url, "userinfo")))  # access denied
    out.append(("my-wrong-password", with_secret(mysql_url, "password")))
    return out


def write_config(folder: Path, url: str, uid: str) -> tuple[Path, str]:
    job = f"sec_{uid}"
    strategy = "mysql" if url.startswith("mysql") else "pg-session"
    path = folder / "lockconsole.toml"
    path.write_text(
        f'[databases.main]\nurl = "{url}"\n'
        f'[jobs.{job}]\nstrategy = "{strategy}"\ncommand = ["{sys.executable}", "-c", '
        f"\"print('done')\"]\n"
        f'[jobs.{job}.idempotency]\ntable = "missing_{uid}"\nkey = ["id"]\n',
        encoding="utf-8",
    )
    return path, job


def cli(config: Path, *args: str) -> str:
    env = dict(os.environ, NO_COLOR="1", PYTHONPATH=str(ROOT))
    env.pop("LOCKCONSOLE_CONFIG", None)
    proc = run_cli(config, *args, env=env)
    assert "Traceback" not in proc.stderr, (args, proc.stderr[-2000:])
    return proc.stdout + proc.stderr


def screens(config: Path, job: str, folder: Path) -> list[str]:
    """Screenshots of the console: dashboard, log, duplicates (failing), help, a trigger."""

    async def main() -> list[str]:
        console = Console(load_config(str(config)))
        shots: list[str] = []
        try:
            app = LockConsoleApp(console, refresh=3600)
            async with app.run_test(size=(160, 50)) as pilot:
                for _ in range(100):  # until the first refresh has landed
                    await pilot.pause(0.1)
                    if app.snapshot is not None or app.errors:
                        break
                await app.workers.wait_for_complete()
                await pilot.pause()
                shots.append(app.export_screenshot())
                for keys in (("1", "d"), ("escape", "t", "h"), ("o",), ("question_mark",)):
                    for key in keys:
                        await pilot.press(key)
                        await pilot.pause()
                    await app.workers.wait_for_complete()
                    await pilot.pause(0.2)
                    shots.append(app.export_screenshot())
                shots.append("\n".join(line.text for line in app.query_one("#log", RichLog).lines))
        finally:
            console.close()
        return shots

    return asyncio.run(main())


def stored(pg_url: str, job: str) -> str:
    """Everything the ledger and the audit keep about the job (both live in PostgreSQL)."""
    with psycopg.connect(pg_url, autocommit=True) as conn:
        text = []
        for table, column in (("lockconsole_runs", "job"), ("lockconsole_audit", "target")):
            if conn.execute("select to_regclass(%s)", (table,)).fetchone()[0]:
                rows = conn.execute(
                    f"select * from {table} where {column} like %s", (f"%{job}%",)
                ).fetchall()
                text += [repr(r) for r in rows]
        return "\n".join(text)


@pytest.mark.parametrize("case", range(11))
def test_the_password_is_found_nowhere(case: int, pg_url, mysql_url, tmp_path, uid) -> None:
    name, url = cases(pg_url, mysql_url)[case]
    config, job = write_config(tmp_path, url, uid)
    holder = None
    if name.startswith("pg-") and "down" not in name:  # a holder to release (audited)
        holder = psycopg.connect(pg_url, autocommit=True)
        holder.execute("select pg_advisory_lock(%s)", (name_to_int64(job),))
    try:
        views = (
            ("config",),
            ("config", "--json"),
            ("locks",),
            ("locks", "--json"),
            ("check",),
            ("check", "--json"),
            ("history",),
            ("history", "--json"),
            ("dupes", job),
            ("dupes", job, "--json"),
            ("dupes", job, "--csv", str(tmp_path / "d.csv")),
        )
        acts = (
            ("run", job),
            ("run", job, "--json"),
            ("release", "--job", job, "--yes"),
            ("release", "--job", job, "--json", "--yes"),
        )
        with ThreadPoolExecutor(max_workers=4) as pool:  # the views change nothing: side by side
            outputs = list(pool.map(lambda args: cli(config, *args), views))
        outputs += [cli(config, *args) for args in acts]  # these in order
        seen = [f"$ {' '.join(a)}\n{out}" for a, out in zip((*views, *acts), outputs, strict=True)]
        seen += screens(config, job, tmp_path)
        if (tmp_path / "d.csv").exists():
            seen.append((tmp_path / "d.csv").read_text(encoding="utf-8"))
        seen.append(stored(pg_url, job))
    finally:
        if holder is not None:
            holder.close()
    everything = "\n".join(seen)
    for form in (SECRET, quote(SECRET), quote(SECRET, safe="")):
        assert form not in everything, (name, _around(everything, form))
    if "down" in name:
        assert "connect" in everything.lower() or "refused" in everything.lower(), name
    if holder is not None:
        assert "released" in everything, "the release went through the audit"


def _around(text: str, needle: str) -> str:
    at = text.find(needle)
    return text[max(0, at - 300) : at + 100]
