"""Shared bits of the stop tests: the jobs they stop, who holds a lock (seen from another
session), is a pid gone."""

from __future__ import annotations

from pathlib import Path

from tests.support.helpers import (
    wait_for as wait_for,  # re-exported: the stop tests import it from here
)

# Writes "started", sleeps, then "finished": a job stopped mid-run never writes the second.
STEPS = (
    "import sys, time; p = sys.argv[1]; open(p, 'a').write('started\\n'); "
    "time.sleep(float(sys.argv[2])); open(p, 'a').write('finished\\n')"
)
# Ignores SIGTERM, starts a grandchild that ignores it too, writes both pids, then sleeps.
STUBBORN = (
    "import os, signal, subprocess, sys, time; signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "kid = subprocess.Popen([sys.executable, '-c', 'import signal, time; "
    "signal.signal(signal.SIGTERM, signal.SIG_IGN); time.sleep(120)']); "
    "open(sys.argv[1], 'w').write(f'{os.getpid()} {kid.pid}'); time.sleep(120)"
)


def pg_lock_holder(pg_conn, key: int) -> int | None:
    """The backend pid that holds advisory key `key` (int64) in `pg_conn`'s database, or None
    (pg_locks shows the whole server: the same key may be held in another database)."""
    row = pg_conn.execute(
        "select pid from pg_locks where locktype = 'advisory' and granted and objsubid = 1"
        " and ((classid::bigint << 32) | objid::bigint) = %s"
        " and database = (select oid from pg_database where datname = current_database())",
        (key,),
    ).fetchone()
    return row[0] if row else None


def mysql_lock_holder(mysql_conn, name: str) -> int | None:
    with mysql_conn.cursor() as cur:
        cur.execute("select IS_USED_LOCK(%s)", (name,))
        return cur.fetchone()[0]


def alive(pid: int) -> bool:
    """True while `pid` runs (a zombie waiting for a reaper counts as gone)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except (FileNotFoundError, ProcessLookupError):
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"
