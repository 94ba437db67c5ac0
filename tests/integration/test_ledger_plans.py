"""Every read a snapshot makes of the run ledger is served by an index, on a filled ledger.

A ledger of its own holds 30 days of four per-minute jobs on three instances (518,400 rows, made
in bulk) and the lookback is one day, so a plan that reads the whole table would be the cost that
grows with the ledger's size. EXPLAIN of each statement the console, `check` and the metrics run
(compiled by SQLAlchemy for the server, as the ledger runs them) must use an index of the table,
never a full scan of it. One job never succeeded: the read of each job's newest success must
still probe, not walk that job's rows (EXPLAIN ANALYZE counts what each probe read).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import psycopg

from lockconsole.backends.ledger import reads
from lockconsole.backends.ledger.store import Ledger
from lockconsole.config.urls import parse_url
from lockconsole.model.jobs import Database

from tests.support.helpers import mysql_connect

JOBS = [f"plan_{j}" for j in range(1, 5)]
DAYS = 30
INDEXES = {
    "ix_lockconsole_runs_job_slot",
    "ix_lockconsole_runs_started_at",
    "ix_lockconsole_runs_job_outcome_slot",
    "PRIMARY",
}
# reads that are index probes, whatever the ledger's size: what one may touch at most
PROBES = {"newest of each job", "newest success of each job", "first slot of each job"}
PROBE_BUFFERS = 20 * len(JOBS)  # PostgreSQL pages, hit or read
PROBE_ROWS = 10 * len(JOBS)  # MariaDB rows read


def _statements(now: datetime) -> dict[str, Any]:
    since = now - timedelta(days=1)
    slots = [now - timedelta(hours=h) for h in (1, 2, 3)]
    return {
        "slot tallies": lambda d: reads.slot_tallies(JOBS, since, d),
        "newest of each job": lambda d: reads.newest_of_each(None, JOBS),
        "newest success of each job": lambda d: reads.newest_of_each(None, JOBS, "succeeded"),
        "first slot of each job": lambda d: reads.first_slots(JOBS),
        "attempts of some slots": lambda d: reads.of_slots(None, JOBS[0], slots, d),
        "history page": lambda d: reads.newest(None, None, dialect=d, since=since, limit=500),
        "history of one job": lambda d: reads.newest(None, JOBS[1], dialect=d, since=since),
    }


def _sql(statement: Any, engine_url: str) -> str:
    from sqlalchemy import create_engine

    dialect = create_engine(engine_url).dialect
    return str(statement.compile(dialect=dialect, compile_kwargs={"literal_binds": True}))


def _pg_scans(plan: Any) -> Iterator[tuple[str, str | None, str | None]]:
    """(node type, relation, index) of every node of a PostgreSQL JSON plan."""
    if isinstance(plan, dict):
        if "Node Type" in plan:
            yield plan["Node Type"], plan.get("Relation Name"), plan.get("Index Name")
        for value in plan.values():
            yield from _pg_scans(value)
    elif isinstance(plan, list):
        for item in plan:
            yield from _pg_scans(item)


def _rows_read(plan: Any) -> Iterator[float]:
    """The rows each table access of a MariaDB ANALYZE FORMAT=JSON plan really read."""
    if isinstance(plan, dict):
        if "table_name" in plan and "r_rows" in plan:
            yield float(plan["r_rows"]) * float(plan.get("r_loops", 1))
        for value in plan.values():
            yield from _rows_read(value)
    elif isinstance(plan, list):
        for item in plan:
            yield from _rows_read(item)


def test_every_snapshot_read_uses_an_index_on_postgresql(own_database: str) -> None:
    Ledger(Database("main", parse_url(own_database))).create_schema()
    with psycopg.connect(own_database, autocommit=True) as conn:
        [[now]] = conn.execute("select date_trunc('minute', now())").fetchall()
        conn.execute(
            """
            insert into lockconsole_runs
              (job, slot, instance, host, pid, trigger, outcome, started_at, finished_at)
            select 'plan_' || j, s, 'web-' || i, 'h', i, 'schedule',
                   case when i <> 1 then 'skipped' when j = 4 then 'failed'
                        else 'succeeded' end, s, s
            from generate_series(1, 4) j,
                 generate_series(%s - %s * interval '1 day', %s, interval '1 minute') s,
                 generate_series(1, 3) i
            """,
            (now, DAYS, now),
        )
        conn.execute("analyze lockconsole_runs")
        [[rows]] = conn.execute("select count(*) from lockconsole_runs").fetchall()
        assert rows > 500_000
        for name, build in _statements(now.astimezone(UTC)).items():
            sql = _sql(build("postgresql"), "postgresql+psycopg://")
            [[plan]] = conn.execute("explain (format json) " + sql).fetchall()
            nodes = list(_pg_scans(plan))
            on_runs = [kind for kind, rel, _ in nodes if rel == "lockconsole_runs"]
            used = {index for _, _, index in nodes if index is not None}
            assert on_runs and "Seq Scan" not in on_runs, (name, json.dumps(plan))
            assert used and used <= INDEXES, (name, nodes)
            if name in PROBES:
                [[ran]] = conn.execute("explain (analyze, buffers, format json) " + sql).fetchall()
                touched = ran[0]["Plan"]["Shared Hit Blocks"] + ran[0]["Plan"]["Shared Read Blocks"]
                assert touched <= PROBE_BUFFERS, (name, json.dumps(ran))


def test_every_snapshot_read_uses_an_index_on_mariadb(fresh_mysql: str) -> None:
    Ledger(Database("main", parse_url(fresh_mysql))).create_schema()
    conn = mysql_connect(fresh_mysql)
    with conn.cursor() as cur:
        cur.execute("select utc_timestamp()")
        [(now,)] = cur.fetchall()
        now = now.replace(second=0, microsecond=0)
        cur.execute(
            f"""
            insert into lockconsole_runs
              (job, slot, instance, host, pid, `trigger`, outcome, started_at, finished_at)
            select concat('plan_', j.seq), s.at, concat('web-', i.seq), 'h', i.seq, 'schedule',
                   if(i.seq <> 1, 'skipped', if(j.seq = 4, 'failed', 'succeeded')), s.at, s.at
            from seq_1_to_4 j,
                 (select %s - interval seq minute as at from seq_0_to_{DAYS * 24 * 60}) s,
                 seq_1_to_3 i
            """,
            (now,),
        )
        conn.commit()
        cur.execute("analyze table lockconsole_runs")
        cur.fetchall()
        for name, build in _statements(now.replace(tzinfo=UTC)).items():
            sql = _sql(build("mysql"), "mysql+pymysql://")
            cur.execute("explain " + sql.replace("%", "%%"))
            columns = [d[0] for d in cur.description]
            plan = [dict(zip(columns, row, strict=True)) for row in cur.fetchall()]
            on_runs = [p for p in plan if p["table"] == "lockconsole_runs"]
            # min() on an index prefix is read from the index's end: "optimized away"
            away = [p for p in plan if "optimized away" in (p["Extra"] or "")]
            assert on_runs or away, (name, plan)
            assert all(p["type"] != "ALL" for p in on_runs), (name, plan)
            assert all(p["key"] in INDEXES for p in on_runs), (name, plan)
            if name in PROBES:
                cur.execute("analyze format=json " + sql.replace("%", "%%"))
                [(ran,)] = cur.fetchall()
                read = sum(_rows_read(json.loads(ran)))
                assert read <= PROBE_ROWS, (name, ran)
    conn.close()
