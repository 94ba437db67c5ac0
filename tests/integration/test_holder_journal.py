"""The holder journal on real servers: samplers write who held which lock and when, one row per
holding even with several samplers at once, with the uncertainty of sampling; read-only writes
nothing; a console started later knows how long a lock has been held."""

from __future__ import annotations

import threading
from datetime import timedelta

import psycopg
import pytest

from lockconsole.backends.ledger import journal as store
from lockconsole.console.facade import Console

from tests.support import helpers

JOURNAL = "lockconsole_holder_journal"


def journal_rows(url: str) -> list[tuple]:
    with psycopg.connect(url) as conn:
        return conn.execute(
            "SELECT holding, open_mark, lock_key, job, application, first_seen, last_seen, gone_by"
            f" FROM {JOURNAL} ORDER BY id"
        ).fetchall()


def let_go(url: str, *holders: psycopg.Connection) -> None:
    """Close the holders' sessions and wait until the server no longer lists their locks (a
    closed client's backend ends a moment later)."""
    pids = [h.info.backend_pid for h in holders]
    for h in holders:
        h.close()
    with psycopg.connect(url, autocommit=True) as conn:
        helpers.wait_for(
            lambda: conn.execute(
                "SELECT count(*) = 0 FROM pg_locks WHERE pid = ANY(%s)", (pids,)
            ).fetchone()[0],
            what="the holders' sessions ended",
        )


def foreign_holder(url: str, key: int, name: str = "psql-foreign") -> psycopg.Connection:
    """A session outside lockconsole (an app's own fix, psql) holding the advisory lock."""
    conn = psycopg.connect(url, autocommit=True, application_name=name)
    conn.execute("SELECT pg_advisory_lock(%s)", (key,))
    return conn


def test_a_holding_is_journaled_with_the_uncertainty_of_sampling(own_database, uid):
    job = f"billing_{uid}"
    config = helpers.config_for(own_database, job)
    key = int(str(config.job(job).key))
    with Console(config, journal=True) as console:
        empty = console.snapshot(duplicates=False)  # a sample before the holder came
        holder = foreign_holder(own_database, key)
        first = console.snapshot(duplicates=False)
        writes = console.journal.writes
        second = console.snapshot(duplicates=False)
        assert console.journal.writes == writes, "nothing changed: nothing written"
        let_go(own_database, holder)
        gone = console.snapshot(duplicates=False)
        engine = console.connections.ledger("main").sa_engine()
        (row,) = journal_rows(own_database)
        assert row[1] is None and row[2] == str(key) and row[3] == job and row[4] == "psql-foreign"
        assert (row[5], row[6], row[7]) == (first.taken_at, second.taken_at, gone.taken_at)
        (entry,) = store.held_at(engine, second.taken_at)
        assert entry.seen_after == empty.taken_at and entry.first_seen == first.taken_at
        assert entry.earliest == empty.taken_at
        # between two samples the holder may or may not have held: both sides are answered
        between = empty.taken_at + (first.taken_at - empty.taken_at) / 2
        assert [e.id for e in store.held_at(engine, between)] == [entry.id]
        assert store.held_at(engine, gone.taken_at + timedelta(microseconds=1)) == []
        assert store.held_at(engine, empty.taken_at - timedelta(seconds=1)) == []
        assert store.held_at(engine, second.taken_at, job="another") == []
        # prune (its cutoff: the server's now minus the age) deletes what was gone by then, and
        # keeps an open holding however old
        again = foreign_holder(own_database, key, "still-holding")
        console.snapshot(duplicates=False)
    try:
        from lockconsole.backends.ledger.retention.prune import prune

        dry = prune(config.databases["main"], timedelta(0), dry_run=True)
        done = prune(config.databases["main"], timedelta(0))
        assert (dry.journal, done.journal) == (1, 1)
        assert [r[4] for r in journal_rows(own_database)] == ["still-holding"]
    finally:
        again.close()


def test_appear_and_go_in_one_sample_is_one_statement_on_postgresql(own_database, uid):
    from sqlalchemy import event

    job = f"billing_{uid}"
    config = helpers.config_for(own_database, job)
    key = int(str(config.job(job).key))
    sent: list[str] = []
    with Console(config, journal=True) as console:
        engine = console.connections.ledger("main").sa_engine()
        event.listen(engine, "before_cursor_execute", lambda *a: sent.append(a[2]))
        old = foreign_holder(own_database, key, "old-holder")
        console.snapshot(duplicates=False)
        let_go(own_database, old)
        new = foreign_holder(own_database, key, "new-holder")
        sent.clear()
        console.snapshot(duplicates=False)
        both = list(sent)
        let_go(own_database, new)
        console.snapshot(duplicates=False)
    rows = journal_rows(own_database)
    assert [(r[4], r[1]) for r in rows] == [("old-holder", None), ("new-holder", None)]
    writes = [s for s in both if JOURNAL in s and ("INSERT" in s or "UPDATE" in s)]
    assert len(writes) == 1, writes  # the close rides in the upsert's statement
    assert "UPDATE" in writes[0] and "INSERT" in writes[0]


def test_two_samplers_at_once_write_no_duplicate(own_database, uid):
    """Two consoles sample the same churning holders at the same instants (a barrier): every
    holding has one row, and none is left open once all are gone."""
    job = f"billing_{uid}"
    config = helpers.config_for(own_database, job)
    base = 7_000_000  # raw advisory locks of no job's key: foreign holders, unmapped
    consoles = [Console(config, journal=True), Console(config, journal=True)]
    rounds = 8
    barrier = threading.Barrier(3)  # the two samplers and this thread, which churns
    failures: list[BaseException] = []

    def sample(console: Console) -> None:
        try:
            for _ in range(rounds + 1):
                barrier.wait(30)  # the holders change between rounds; both sample together
                console.snapshot(duplicates=False)
                barrier.wait(30)
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            failures.append(exc)
            barrier.abort()

    threads = [threading.Thread(target=sample, args=(c,)) for c in consoles]
    holders: list[psycopg.Connection] = []
    try:
        for t in threads:
            t.start()
        for n in range(rounds + 1):
            let_go(own_database, *holders[: n % 3])  # some go, new ones come: churn
            holders = holders[n % 3 :]
            if n < rounds:
                holders += [foreign_holder(own_database, base + n * 10 + i) for i in range(3)]
            barrier.wait(30)
            barrier.wait(30)
        # the rest go, and are surely gone from pg_locks (a closed client's backend ends a
        # moment later) before the last sampler looks
        let_go(own_database, *holders)
        holders = []
    finally:
        for conn in holders:
            conn.close()
        for t in threads:
            t.join(60)
    assert not failures, failures
    rows = journal_rows(own_database)
    holdings = [r[0] for r in rows]
    assert len(rows) == rounds * 3
    assert len(holdings) == len(set(holdings)), "a holding written twice"
    with Console(config, journal=True) as last:  # a later sampler closes what is left open
        last.snapshot(duplicates=False)
    for console in consoles:
        console.close()
    assert [r for r in journal_rows(own_database) if r[1] is not None] == []


def test_a_read_only_console_writes_nothing(own_database, uid):
    job = f"billing_{uid}"
    config = helpers.config_for(own_database, job)
    holder = foreign_holder(own_database, int(str(config.job(job).key)))
    try:
        with Console(config, read_only=True) as console:
            assert console.journal is None
            console.snapshot(duplicates=False)
            console.snapshot(duplicates=False)
    finally:
        holder.close()
    with psycopg.connect(own_database) as conn:
        assert conn.execute("SELECT to_regclass(%s)", (JOURNAL,)).fetchone() == (None,)


def test_a_later_console_knows_how_long_a_lock_has_been_held(own_database, uid):
    """FOR from the journal: a console started after the holder took its lock (and after an
    earlier sampler saw it) counts from the journal's first sighting, not its own."""
    job = f"billing_{uid}"
    config = helpers.config_for(own_database, job)
    holder = foreign_holder(own_database, int(str(config.job(job).key)))
    holder.execute("SELECT 1")  # an active-then-idle session: its statement end bounds too
    try:
        with Console(config, journal=True) as early:
            seen = early.snapshot(duplicates=False)
        with psycopg.connect(own_database, autocommit=True) as conn:
            conn.execute("SELECT pg_sleep(0.3)")  # the later console's own first sighting is later
        holder.execute("SELECT 1")  # the idle bound moves past the journal's sighting
        with Console(config, journal=True) as later:
            (h,) = [h for h in later.snapshot(duplicates=False).holders if h.granted]
            assert h.first_seen == seen.taken_at
            assert h.held_since is not None and h.held_since <= seen.taken_at
        with Console(config) as unjournaled:  # without the journal: its own sighting only
            (h,) = [h for h in unjournaled.snapshot(duplicates=False).holders if h.granted]
            assert h.first_seen is not None and h.first_seen > seen.taken_at
    finally:
        holder.close()


@pytest.mark.mysql
def test_mariadb_get_lock_holders_are_journaled(mysql_url, mysql_conn, uid):
    """A GET_LOCK holder on MariaDB, journaled in the MariaDB ledger: the other dialect's
    upsert and close, and its reads."""
    job = f"report_{uid}"
    config = helpers.config_for(mysql_url, job, "mysql")
    name = str(config.job(job).key)
    other = helpers.mysql_connect(mysql_url)
    try:
        with Console(config, journal=True) as console:
            console.snapshot(duplicates=False)
            with other.cursor() as cur:
                cur.execute("SELECT GET_LOCK(%s, 0)", (name,))
            held = console.snapshot(duplicates=False)
            with other.cursor() as cur:
                cur.execute("SELECT RELEASE_LOCK(%s)", (name,))
            gone = console.snapshot(duplicates=False)
            engine = console.connections.ledger("main").sa_engine()
            entries = store.held_at(engine, held.taken_at, job=job)
            assert [(e.key, e.first_seen, e.last_seen, e.gone_by) for e in entries] == [
                (name, held.taken_at, held.taken_at, gone.taken_at)
            ]
    finally:
        other.close()


def test_schedule_samples_the_holders_into_the_journal(own_database, uid, tmp_path, cli_env):
    """`lockconsole schedule` is a sampler too: a foreign holder that comes and goes while it
    runs is journaled (appeared, then closed) by its own thread, every journal_every."""
    import subprocess
    import sys

    job = f"billing_{uid}"
    config = tmp_path / "lockconsole.toml"
    config.write_text(
        f'[databases.main]\nurl = "{own_database}"\n[ledger]\njournal_every = "1s"\n'
        f'[jobs.{job}]\nstrategy = "pg-session"\nschedule = "0 2 * * *"\ncommand = ["true"]\n',
        encoding="utf-8",
    )
    key = int(str(helpers.config_for(own_database, job).job(job).key))
    proc = subprocess.Popen(
        [sys.executable, "-m", "lockconsole", "--config", str(config), "schedule", "--for", "60"],
        env=cli_env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        with psycopg.connect(own_database, autocommit=True) as conn:

            def journaled(open_mark: object) -> bool:
                if conn.execute("SELECT to_regclass(%s)", (JOURNAL,)).fetchone() == (None,):
                    return False
                found = conn.execute(
                    f"SELECT count(*) FROM {JOURNAL} WHERE lock_key = %s"
                    " AND open_mark IS NOT DISTINCT FROM %s",
                    (str(key), open_mark),
                ).fetchone()
                return bool(found and found[0] == 1)

            holder = foreign_holder(own_database, key, "held-while-scheduling")
            helpers.wait_for(lambda: journaled(1), timeout=30, what="the holder journaled")
            let_go(own_database, holder)
            helpers.wait_for(lambda: journaled(None), timeout=30, what="the holding closed")
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    (row,) = journal_rows(own_database)
    assert row[3] == job and row[4] == "held-while-scheduling"


@pytest.mark.parametrize("read_only", [False, True], ids=["serving", "read-only"])
def test_the_metrics_exporter_is_a_sampler_unless_read_only(
    own_database, uid, tmp_path, cli_env, read_only
):
    """A serving `lockconsole metrics` journals the holders of each scrape (one sampler for a
    fleet); with --read-only it writes nothing, not even the table."""
    import subprocess
    import sys
    import urllib.request

    job = f"billing_{uid}"
    config = tmp_path / "lockconsole.toml"
    config.write_text(
        f'[databases.main]\nurl = "{own_database}"\n[jobs.{job}]\nstrategy = "pg-session"\n',
        encoding="utf-8",
    )
    key = int(str(helpers.config_for(own_database, job).job(job).key))
    holder = foreign_holder(own_database, key, "seen-by-the-exporter")
    flags = ["--read-only"] if read_only else []
    proc = subprocess.Popen(
        [sys.executable, "-m", "lockconsole", "--config", str(config), *flags, "metrics"]
        + ["--listen", "127.0.0.1:0"],
        stderr=subprocess.PIPE,
        text=True,
        env=cli_env,
    )
    try:
        assert proc.stderr is not None
        line = proc.stderr.readline()
        assert line.startswith("serving metrics on "), line
        with urllib.request.urlopen(line.split(" on ", 1)[1].strip(), timeout=60) as answer:
            assert answer.status == 200
    finally:
        proc.terminate()
        proc.communicate(timeout=30)
        holder.close()
    with psycopg.connect(own_database) as conn:
        table = conn.execute("SELECT to_regclass(%s)", (JOURNAL,)).fetchone()
    if read_only:
        assert table == (None,)
    else:
        assert [(r[3], r[4], r[1]) for r in journal_rows(own_database)] == [
            (job, "seen-by-the-exporter", 1)
        ]


def test_a_sqlite_ledger_keeps_the_journal(own_database, uid, tmp_path):
    """With `ledger_database` a SQLite file, the holders of PostgreSQL are journaled there."""
    from lockconsole.config.loader import parse_config

    job = f"billing_{uid}"
    config = parse_config(
        f'[lockconsole]\nledger_database = "ledger"\n[databases.main]\nurl = "{own_database}"\n'
        f'[databases.ledger]\nurl = "sqlite:///{tmp_path}/ledger.db"\n'
        f'[jobs.{job}]\ndatabase = "main"\nstrategy = "pg-session"\n'
    )
    key = int(str(config.job(job).key))
    with Console(config, journal=True) as console:
        console.snapshot(duplicates=False)
        holder = foreign_holder(own_database, key, "seen-into-sqlite")
        seen = console.snapshot(duplicates=False)
        again = console.snapshot(duplicates=False)  # the same holders: nothing to write
        let_go(own_database, holder)
        gone = console.snapshot(duplicates=False)
        engine = console.connections.ledger("ledger").sa_engine()
        (entry,) = store.held_at(engine, seen.taken_at)
    assert (entry.application, entry.job, entry.first_seen) == (
        "seen-into-sqlite",
        job,
        seen.taken_at,
    )
    assert (entry.last_seen, entry.gone_by) == (again.taken_at, gone.taken_at)


@pytest.mark.parametrize("kind", ["lease", "redis"])
def test_lease_rows_and_redis_keys_are_journaled(own_database, uid, kind, request):
    """A ShedLock-style lease row and a Redis key, held by a real attempt, are journaled as
    they come and go, like an advisory lock."""
    from lockconsole import run_once
    from lockconsole.config.loader import parse_config

    job = f"held_{uid}"
    if kind == "redis":
        from tests.support.redis_fixture import redis_job_config

        config = parse_config(
            redis_job_config(own_database, request.getfixturevalue("redis_url"), job)
        )
        home = "ledger"
    else:
        config = parse_config(
            f'[databases.main]\nurl = "{own_database}"\n[jobs.{job}]\nstrategy = "lease"\n'
            f'lease_table = "shedlock_{uid}"\nonce_per_slot = false\n'
        )
        home = "main"
    with Console(config, journal=True) as console:
        console.snapshot(duplicates=False)
        with run_once(job, config=config, instance="web-1") as attempt:
            assert attempt.acquired
            held = console.snapshot(duplicates=False)
        gone = console.snapshot(duplicates=False)
        engine = console.connections.ledger(home).sa_engine()
        entries = store.held_at(engine, held.taken_at, job=job)
    assert [(e.kind, e.first_seen, e.gone_by) for e in entries] == [
        (kind, held.taken_at, gone.taken_at)
    ]
