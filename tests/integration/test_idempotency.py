"""claim() and unique_key_ddl() against real PostgreSQL, MariaDB/MySQL and SQLite.

Each test makes its own table (invoices_<uid>) and drops it afterwards.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

from lockconsole.backends.sa import engine_for
from lockconsole.config.urls import parse_url
from lockconsole.idempotency import claim, unique_key_ddl

from tests.support.helpers import mysql_connect
from tests.support.settings import ROOT

DIALECTS = ["postgresql", "mysql", "sqlite"]
KEY = ("tenant_id", "period")


@pytest.fixture(params=DIALECTS)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "postgresql":
        return request.getfixturevalue("pg_url")
    if request.param == "mysql":
        return request.getfixturevalue("mysql_url")
    return f"sqlite:///{tmp_path / 'billing.db'}"


def raw_connect(url: str, *, autocommit: bool = True, found_rows: bool = False) -> Any:
    u = parse_url(url)
    if u.dialect == "postgresql":
        import psycopg

        return psycopg.connect(url, autocommit=autocommit)
    if u.dialect == "mysql":
        from pymysql.constants import CLIENT

        return mysql_connect(
            url, autocommit=autocommit, client_flag=CLIENT.FOUND_ROWS if found_rows else 0
        )
    assert u.database, url
    return sqlite3.connect(
        u.database, isolation_level=None if autocommit else "DEFERRED", timeout=30
    )


def execute(url: str, statement: str) -> None:
    with closing(raw_connect(url)) as conn:
        cur = conn.cursor()
        cur.execute(statement)
        cur.close()


def count(url: str, table: str, where: str = "") -> int:
    with closing(raw_connect(url)) as conn:
        cur = conn.cursor()
        cur.execute(f"SELECT COUNT(*) FROM {table} {where}")
        (n,) = cur.fetchone()
        cur.close()
        return n


@pytest.fixture
def table(url: str, uid: str) -> Iterator[str]:
    """invoices_<uid>(id, tenant_id, period, amount) with UNIQUE (tenant_id, period)."""
    name = f"invoices_{uid}"
    execute(
        url,
        f"CREATE TABLE {name} (tenant_id INTEGER NOT NULL, period VARCHAR(7) NOT NULL, "
        f"amount INTEGER NOT NULL, CONSTRAINT {name}_key UNIQUE (tenant_id, period))",
    )
    yield name
    execute(url, f"DROP TABLE {name}")


CONNECTION_KINDS = ["raw", "raw-not-autocommit", "sqlalchemy"]


@pytest.mark.parametrize("kind", CONNECTION_KINDS)
def test_claim_true_then_false_across_connections(url: str, table: str, kind: str) -> None:
    row = {"tenant_id": 42, "period": "2026-11", "amount": 990}
    if kind == "sqlalchemy":
        engine = engine_for(parse_url(url))
        try:
            with engine.connect() as first:
                assert claim(first, table, row, key=KEY) is True
                first.commit()
            with engine.connect() as second:
                assert claim(second, table, {**row, "amount": 1}, key=KEY) is False
                # the failed claim leaves the transaction usable
                assert claim(second, table, {**row, "period": "2026-12"}, key=KEY) is True
                second.commit()
        finally:
            engine.dispose()
    else:
        autocommit = kind != "raw-not-autocommit"
        with closing(raw_connect(url, autocommit=autocommit)) as first:
            assert claim(first, table, row, key=KEY) is True
            if not autocommit:
                first.commit()
        with closing(raw_connect(url, autocommit=autocommit)) as second:
            assert claim(second, table, {**row, "amount": 1}, key=KEY) is False
            assert claim(second, table, {**row, "period": "2026-12"}, key=KEY) is True
            if not autocommit:
                second.commit()
    assert count(url, table) == 2
    assert count(url, table, "WHERE tenant_id = 42 AND period = '2026-11' AND amount = 990") == 1


@pytest.mark.parametrize("autocommit", [True, False])
def test_mysql_found_rows_connection(mysql_url: str, uid: str, autocommit: bool) -> None:
    """With CLIENT_FOUND_ROWS a no-op ON DUPLICATE KEY UPDATE reports 1 row, like an insert;
    claim must still tell them apart (it does so on such connections by catching 1062)."""
    url, name = mysql_url, f"fr_{uid}"
    execute(
        url,
        f"CREATE TABLE {name} (tenant_id INT NOT NULL, period VARCHAR(7) NOT NULL, "
        f"UNIQUE KEY (tenant_id, period))",
    )
    try:
        row = {"tenant_id": 1, "period": "2026-11"}
        with closing(raw_connect(url, autocommit=autocommit, found_rows=True)) as conn:
            assert claim(conn, name, row, key=KEY) is True
            assert claim(conn, name, row, key=KEY) is False
            assert claim(conn, name, {**row, "tenant_id": 2}) is True
            if not autocommit:
                conn.commit()  # the duplicate rolled back only its own statement
        assert count(url, name) == 2
    finally:
        execute(url, f"DROP TABLE {name}")


def test_claim_without_key_uses_any_unique_key(url: str, table: str) -> None:
    with closing(raw_connect(url)) as conn:
        assert claim(conn, table, {"tenant_id": 1, "period": "2026-01", "amount": 5}) is True
        assert claim(conn, table, {"tenant_id": 1, "period": "2026-01", "amount": 6}) is False
    assert count(url, table) == 1


def test_claim_does_not_commit(url: str, table: str) -> None:
    row = {"tenant_id": 7, "period": "2026-02", "amount": 1}
    with closing(raw_connect(url, autocommit=False)) as conn:
        assert claim(conn, table, row, key=KEY) is True
        conn.rollback()
        assert claim(conn, table, row, key=KEY) is True  # the rollback undid the claim
        conn.rollback()
    assert count(url, table) == 0
    engine = engine_for(parse_url(url))
    try:
        with engine.connect() as conn:
            assert claim(conn, table, row, key=KEY) is True
            conn.rollback()
    finally:
        engine.dispose()
    assert count(url, table) == 0


def test_other_errors_still_raise(url: str, table: str) -> None:
    with closing(raw_connect(url)) as conn, pytest.raises(Exception) as info:
        claim(conn, table, {"tenant_id": 3, "period": "2026-03", "amount": None}, key=KEY)
    assert "null" in str(info.value).lower()
    assert count(url, table) == 0


def test_bad_identifiers_are_refused(url: str, table: str) -> None:
    with closing(raw_connect(url)) as conn:
        for bad_table in ("invoices; DROP TABLE x", 'invoices"', "a.b.c", ""):
            with pytest.raises(ValueError):
                claim(conn, bad_table, {"tenant_id": 1})
        with pytest.raises(ValueError):
            claim(conn, table, {"tenant_id; DROP TABLE x": 1})
        with pytest.raises(ValueError):
            claim(conn, table, {"tenant_id": 1}, key=["tenant_id", "period) --"])
        with pytest.raises(ValueError):
            claim(conn, table, {"tenant_id": 1}, key=["period"])  # key without a value
        with pytest.raises(ValueError):
            claim(conn, table, {"tenant_id": 1}, key="tenant_id")  # a string is not a list
    assert count(url, table) == 0
    with pytest.raises(ValueError):
        unique_key_ddl("postgresql", "invoices; DROP TABLE x", KEY)
    with pytest.raises(ValueError):
        unique_key_ddl("mysql", "invoices", ["tenant_id", "x; DROP TABLE y"])
    with pytest.raises(ValueError):
        unique_key_ddl("oracle", "invoices", KEY)
    with pytest.raises(TypeError):
        claim(object(), table, {"tenant_id": 1})


def test_unique_key_ddl_text() -> None:
    assert unique_key_ddl("postgresql", "invoices", KEY) == (
        "ALTER TABLE invoices ADD CONSTRAINT invoices_tenant_id_period_key "
        "UNIQUE (tenant_id, period)"
    )
    assert unique_key_ddl("mysql", "invoices", KEY) == (
        "ALTER TABLE invoices ADD CONSTRAINT invoices_tenant_id_period_key "
        "UNIQUE (tenant_id, period)"
    )
    assert unique_key_ddl("sqlite", "invoices", KEY) == (
        "CREATE UNIQUE INDEX invoices_tenant_id_period_key ON invoices (tenant_id, period)"
    )
    # reserved words and capitals are quoted the dialect's way
    assert '"order"' in unique_key_ddl("postgresql", "Billing", ["tenant_id", "order"])
    assert "`order`" in unique_key_ddl("mysql", "billing", ["tenant_id", "order"])


def test_unique_key_ddl_executes_then_duplicates_fail(url: str, uid: str) -> None:
    name = f"nokey_{uid}"
    execute(url, f"CREATE TABLE {name} (tenant_id INTEGER NOT NULL, period VARCHAR(7) NOT NULL)")
    try:
        execute(url, f"INSERT INTO {name} (tenant_id, period) VALUES (1, '2026-11')")
        execute(url, f"INSERT INTO {name} (tenant_id, period) VALUES (1, '2026-11')")  # allowed
        execute(url, f"DELETE FROM {name}")
        execute(url, unique_key_ddl(parse_url(url).dialect, name, KEY))
        execute(url, f"INSERT INTO {name} (tenant_id, period) VALUES (1, '2026-11')")
        with pytest.raises(Exception) as info:
            execute(url, f"INSERT INTO {name} (tenant_id, period) VALUES (1, '2026-11')")
        assert (
            "IntegrityError" in type(info.value).__name__ or "Unique" in type(info.value).__name__
        )
        with closing(raw_connect(url)) as conn:
            assert claim(conn, name, {"tenant_id": 1, "period": "2026-11"}, key=KEY) is False
            assert claim(conn, name, {"tenant_id": 2, "period": "2026-11"}, key=KEY) is True
    finally:
        execute(url, f"DROP TABLE {name}")


WORKER = textwrap.dedent(
    """
    import json, sqlite3, sys
    from lockconsole.idempotency import claim
    from lockconsole.config.urls import parse_url

    url, table, mode = sys.argv[1], sys.argv[2], sys.argv[3]
    u = parse_url(url)
    if mode == "sqlalchemy":
        from lockconsole.backends.sa import engine_for
        engine = engine_for(u)
        conn = engine.connect()
    elif u.dialect == "postgresql":
        import psycopg
        conn = psycopg.connect(url, autocommit=True)
    elif u.dialect == "mysql":
        import pymysql
        conn = pymysql.connect(host=u.host, port=u.port or 3306, user=u.user,
                               password=u.password or "", database=u.database, autocommit=True)
    else:
        conn = sqlite3.connect(u.database, isolation_level=None, timeout=30)
    print("ready", flush=True)
    sys.stdin.readline()  # every process starts claiming at the same moment
    won = []
    for tenant in range(20):
        row = {"tenant_id": tenant, "period": "2026-11", "amount": 1}
        if claim(conn, table, row, key=("tenant_id", "period")):
            won.append(tenant)
        if mode == "sqlalchemy":
            conn.commit()
    print(json.dumps(won))
    """
)


@pytest.mark.parametrize("mode", ["raw", "sqlalchemy"])
def test_concurrent_processes_claim_each_key_once(url: str, table: str, mode: str) -> None:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, url, table, mode],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(6)
    ]
    for proc in procs:  # all connected
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    for proc in procs:
        assert proc.stdin is not None
        proc.stdin.write("go\n")
        proc.stdin.flush()
    wins: list[int] = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        wins.extend(json.loads(out))
    assert sorted(wins) == list(range(20)), "every key claimed by exactly one process"
    assert count(url, table) == 20
