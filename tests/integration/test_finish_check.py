"""finish_release_run's lock check: pg-session's reads pg_locks; pg-xact's, which runs inside the
transaction that holds the key (a lost session or an ended transaction fails it first), does
not read it at all (EXPLAIN ANALYZE: the scan of pg_locks is never executed)."""

from __future__ import annotations

import psycopg
import pytest

from lockconsole.backends import sqlfiles
from lockconsole.backends.ledger.store import Ledger
from lockconsole.config.urls import parse_url
from lockconsole.model.jobs import Database

PARAMS = {
    "classid": 0, "objid": 1, "objsubid": 1, "outcome": "succeeded", "finished_at": None,
    "exit_code": 0, "message": None, "lost_message": "lost", "id": -1, "instance": "none",
    "pid": 0, "release": False, "key": 1, "key1": None, "key2": None, "async_commit": False,
}  # fmt: skip


@pytest.mark.parametrize(("in_transaction", "reads_pg_locks"), [(True, False), (False, True)])
def test_the_lock_check_reads_pg_locks_only_outside_the_locks_transaction(
    pg_url, in_transaction, reads_pg_locks
):
    with Ledger(Database("main", parse_url(pg_url))) as ledger:
        ledger.create_schema()  # the table the statement updates
    sql = sqlfiles.load("finish_release_run", "postgresql")
    with psycopg.connect(pg_url) as conn:  # a transaction: the EXPLAIN's UPDATE is rolled back
        plan = conn.execute(
            "EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF) " + sql,
            PARAMS | {"in_transaction": in_transaction},
        ).fetchall()
        conn.rollback()
    scans = [str(r[0]) for r in plan if "pg_lock_status" in str(r[0])]
    assert len(scans) == 1, plan
    assert ("never executed" not in scans[0]) is reads_pg_locks, scans
