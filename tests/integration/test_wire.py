"""The run path's libpq pipeline (backends/postgres/wire.py) on a real PostgreSQL: values go and
come back exactly as through a psycopg cursor, a failure mid-pipeline keeps what answered before
it and rolls the rest back, statements are prepared once on a direct connection and never on
one that is not, and a socket cut while it waits ends the wait with an error."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta, timezone
from decimal import Decimal
from typing import Any
from urllib.parse import urlsplit

import psycopg
import pytest

from lockconsole.backends.connect import shut_socket
from lockconsole.backends.postgres import wire
from lockconsole.backends.postgres.wire import mark_direct, wire_for

from tests.support.tcp_proxy import SwitchableProxy

VALUES: dict[str, Any] = {
    "text": "bill\x1b[31m[red]ing ünïcødé ✓ \u202e\r\n\t end",
    "markup": "[/] [link=https://x] :smile: %(x)s %% $1",
    "empty": "",
    "none": None,
    "big": -(2**63),
    "small": 7,
    "flag": True,
    "aware": datetime(2026, 3, 29, 1, 59, 59, 999999, tzinfo=UTC),
    "zoned": datetime(2026, 10, 25, 2, 30, tzinfo=timezone(timedelta(hours=13, minutes=45))),
    "naive": datetime(2026, 1, 1, 0, 0, 0, 1),
    "number": Decimal("12345678901234567890.000001"),
}
ECHO = (
    "SELECT %(text)s::text, %(markup)s::text, %(empty)s::text, %(none)s::text, %(big)s::bigint,"
    " %(small)s::integer, %(flag)s::boolean, %(aware)s::timestamptz, %(zoned)s::timestamptz,"
    " %(naive)s::timestamp, %(number)s::numeric"
)


@pytest.fixture
def conn(pg_url: str):
    with psycopg.connect(pg_url, autocommit=True, prepare_threshold=None) as c:
        yield c


def _prepared(c: psycopg.Connection[Any]) -> list[str]:
    rows = c.execute("SELECT name FROM pg_prepared_statements ORDER BY name").fetchall()
    return [str(r[0]) for r in rows]


@pytest.mark.parametrize("direct", [False, True])
def test_values_go_and_come_back_as_a_cursor_has_them(conn, direct) -> None:
    expected = conn.execute(ECHO, VALUES).fetchone()
    if direct:
        mark_direct(conn)
    for _ in range(3):  # unnamed, or prepared then executed by name
        answer = wire_for(conn).exchange([(ECHO, VALUES)])
        assert answer.error is None
        assert answer.rows == [expected]
    assert expected is not None
    assert expected[0] == VALUES["text"] and expected[7] == VALUES["aware"]


def test_a_failure_mid_pipeline_keeps_what_answered_and_rolls_the_rest_back(conn, uid) -> None:
    table = f"wire_{uid}"
    conn.execute(f"CREATE TABLE {table} (v integer)")
    try:
        answer = wire_for(conn).exchange(
            [
                (f"INSERT INTO {table} VALUES (%(v)s) RETURNING v", {"v": 1}),
                ("SELECT 1 / %(zero)s", {"zero": 0}),
                (f"INSERT INTO {table} VALUES (%(v)s) RETURNING v", {"v": 2}),
            ]
        )
        assert isinstance(answer.error, psycopg.errors.DivisionByZero)
        assert answer.rows == [(1,)] and answer.row(1) is None and answer.row(2) is None
        # one Sync, one implicit transaction: the first INSERT went with the failure
        assert conn.execute(f"SELECT count(*) FROM {table}").fetchone() == (0,)
        assert conn.pgconn.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert wire_for(conn).exchange([("SELECT %(x)s::int", {"x": 3})]).rows == [(3,)]
    finally:
        conn.execute(f"DROP TABLE {table}")


def test_a_direct_connection_prepares_each_statement_once_another_never(conn) -> None:
    statements: list[tuple[str, dict[str, Any]]] = [
        ("SELECT %(a)s::int + 1", {"a": 1}),
        ("SELECT %(b)s::text", {"b": "x"}),
    ]
    for _ in range(4):
        assert wire_for(conn).exchange(statements).rows == [(2,), ("x",)]
    assert _prepared(conn) == []
    mark_direct(conn)
    for _ in range(4):
        assert wire_for(conn).exchange(statements).rows == [(2,), ("x",)]
    assert _prepared(conn) == ["lockconsole_0", "lockconsole_1"]


def test_a_statement_that_fails_to_prepare_is_prepared_again_next_time(conn, uid) -> None:
    mark_direct(conn)
    table = f"later_{uid}"
    sql = f"SELECT count(*) FROM {table}"
    assert isinstance(wire_for(conn).exchange([(sql, {})]).error, psycopg.errors.UndefinedTable)
    conn.execute(f"CREATE TABLE {table} (v integer)")
    try:
        assert wire_for(conn).exchange([(sql, {})]).rows == [(0,)]
    finally:
        conn.execute(f"DROP TABLE {table}")


def test_a_socket_cut_while_the_wire_waits_ends_the_wait(pg_url, monkeypatch) -> None:
    parts = urlsplit(pg_url)
    if not parts.hostname:
        pytest.skip("needs PostgreSQL on TCP")
    proxy = SwitchableProxy((parts.hostname, parts.port or 5432))
    url = pg_url.replace(parts.netloc, f"{parts.username}@127.0.0.1:{proxy.port}")
    waiting = threading.Event()
    real_wait = wire._wait

    def hooked(fd: int, *, write: bool = False) -> None:
        waiting.set()  # the wire is about to wait for the silent peer
        real_wait(fd, write=write)

    try:
        with psycopg.connect(url, autocommit=True) as c:
            fd = c.fileno()
            proxy.stall()  # the peer keeps the socket open and never answers
            monkeypatch.setattr(wire, "_wait", hooked)
            cutter = threading.Thread(target=lambda: (waiting.wait(30), shut_socket(fd)))
            cutter.start()
            with pytest.raises(psycopg.OperationalError):
                wire_for(c).exchange([("SELECT pg_sleep(0)", {})])
            cutter.join(30)
            assert waiting.is_set()
            assert c.closed
    finally:
        proxy.close()


def test_an_interrupt_half_way_closes_the_connection_rather_than_leave_answers(
    conn, monkeypatch
) -> None:
    def interrupted(fd: int, *, write: bool = False) -> None:
        raise KeyboardInterrupt  # as a signal handler raising while the wire waits

    monkeypatch.setattr(wire, "_wait", interrupted)
    with pytest.raises(KeyboardInterrupt):
        wire_for(conn).exchange([("SELECT pg_sleep(0.2)", {})])
    assert conn.closed  # the sleep's answer was never read: nothing may read it later


def test_statements_dropped_behind_the_wires_back_are_prepared_again(conn) -> None:
    mark_direct(conn)
    statements: list[tuple[str, dict[str, Any]]] = [("SELECT %(a)s::int * 2", {"a": 21})]
    assert wire_for(conn).exchange(statements).rows == [(42,)]
    conn.execute("DEALLOCATE ALL")  # as psycopg sends after a rollback when it prepared
    failed = wire_for(conn).exchange(statements)
    assert isinstance(failed.error, psycopg.errors.InvalidSqlStatementName)
    assert wire_for(conn).exchange(statements).rows == [(42,)]  # prepared again


def test_a_connection_and_its_wire_are_collected_together(pg_url) -> None:
    import gc
    import weakref

    c = psycopg.connect(pg_url, autocommit=True)
    wire_for(c).exchange([("SELECT 1", {})])
    gone = weakref.ref(c)
    c.close()
    del c
    gc.collect()
    assert gone() is None


def test_the_wire_refuses_a_connection_in_transaction_mode(pg_url) -> None:
    with psycopg.connect(pg_url) as c, pytest.raises(ValueError, match="autocommit"):
        wire_for(c)
