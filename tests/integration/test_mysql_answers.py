"""The run path's own reader of MySQL answers (backends/mysql/answers.py) against MariaDB: what it
returns is what PyMySQL's cursor returns, an error answer says which statement it replaced (and
nothing after it ran), the connection's status is kept for escaping, and a cut socket ends a
wait as PyMySQL's reader would."""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any

import pytest

from lockconsole.backends.mysql.answers import CallFailed, call

pytestmark = pytest.mark.mysql
ODD = "wéb-1 \"q\" 'x' \\ %s _% \t\x01\x1f\x7f\ufeff ☃ 😀"


@pytest.fixture
def conn(mysql_url: str) -> Any:
    from lockconsole.backends.connect import connect_mysql
    from lockconsole.config.urls import parse_url

    c = connect_mysql(parse_url(mysql_url), read_timeout=10, multi_statements=True)
    yield c
    c.close()


def _cursor_last_row(conn: Any, sql: str) -> Any:
    with conn.cursor() as cur:
        cur.execute(sql)
        row = cur.fetchone() if cur.description else None
        while cur.nextset():
            if cur.description:
                row = cur.fetchone()
    return row


def test_the_last_result_sets_first_row_is_what_a_cursor_reads(conn):
    literal = conn.escape(ODD)
    queries = [
        f"SELECT {literal}, NULL, '', 42, REPEAT('é', 40000)",
        f"SET @x = {literal}; DO 1; SELECT @x, JSON_ARRAY(@x, NULL, 7); SELECT 1 FROM DUAL WHERE 0",
        "SELECT 1; SELECT 2 UNION ALL SELECT 3",
        "DO 1",
    ]
    for sql in queries:
        expected = _cursor_last_row(conn, sql)
        got = call(conn, sql)
        text = None if expected is None else tuple(None if v is None else str(v) for v in expected)
        assert got == text, sql  # every value as text: the answers are read as JSON text
    assert call(conn, queries[0])[0] == ODD  # exact, control characters and all


def test_an_error_says_which_statement_failed_and_nothing_after_it_ran(conn):
    with pytest.raises(CallFailed) as failed:
        call(conn, "SET @x = 1; SELECT no_such_column; SET @x = 2")
    assert failed.value.index == 1
    assert failed.value.error.args[0] == 1054  # unknown column, as PyMySQL raises it
    with pytest.raises(type(failed.value.error)):  # the same class a cursor raises
        _cursor_last_row(conn, "SELECT no_such_column")
    assert call(conn, "SELECT @x") == ("1",)  # the connection goes on; the SET after never ran


def test_the_connections_status_follows_the_answers_so_strings_are_escaped_right(conn):
    assert conn.escape("a'b") == "'a\\'b'"
    call(conn, "SET SESSION sql_mode = CONCAT(@@sql_mode, ',NO_BACKSLASH_ESCAPES'); DO 1")
    assert conn.escape("a'b") == "'a''b'"
    assert call(conn, f"SELECT {conn.escape(ODD)}") == (ODD,)


def test_a_socket_cut_while_waiting_ends_the_call_and_closes_the_connection(conn, mysql_conn):
    """The deadline's cut (engine/closing.py) shuts the socket down while the answer is awaited;
    the instant is placed once the server shows the statement running."""
    import socket

    from pymysql import err

    outcome: list[BaseException] = []

    def waiting() -> None:
        try:
            call(conn, "SELECT SLEEP(30)")
        except BaseException as exc:
            outcome.append(exc)

    thread = threading.Thread(target=waiting)
    thread.start()
    deadline = time.monotonic() + 10
    with mysql_conn.cursor() as cur:
        while thread.is_alive() and time.monotonic() < deadline:  # until it runs on the server
            cur.execute(
                "SELECT COUNT(*) FROM information_schema.PROCESSLIST"
                " WHERE ID = %s AND INFO LIKE %s",
                (conn.thread_id(), "SELECT SLEEP(30)%"),
            )
            if cur.fetchone()[0]:
                break
            time.sleep(0.01)
        else:
            pytest.fail(f"the statement never showed as running: {outcome}")
    conn._sock.shutdown(socket.SHUT_RDWR)
    thread.join(10)
    assert not thread.is_alive()
    assert len(outcome) == 1 and isinstance(outcome[0], err.OperationalError)
    assert outcome[0].args[0] == 2013 and not conn.open
    with mysql_conn.cursor() as cur, contextlib.suppress(err.OperationalError):
        cur.execute("KILL %s", (conn.thread_id(),))  # 1094 once the server ended it itself


def test_a_connection_that_asked_for_deprecate_eof_is_read_by_the_cursor(conn, monkeypatch):
    """Should PyMySQL ever ask for CLIENT_DEPRECATE_EOF, the reader hands the call to its cursor:
    the same answers and the same CallFailed (the flag is set here after the handshake, so the
    server still sends the EOF packets the cursor reads)."""
    from lockconsole.backends.mysql import answers

    sql = f"SET @x = {conn.escape(ODD)}; SELECT @x, NULL, 42"
    expected = call(conn, sql)
    monkeypatch.setattr(conn, "client_flag", conn.client_flag | answers._DEPRECATE_EOF)
    used: list[str] = []
    real = answers._by_cursor
    monkeypatch.setattr(answers, "_by_cursor", lambda c, s: used.append(s) or real(c, s))
    assert call(conn, sql) == expected == (ODD, None, "42")
    with pytest.raises(CallFailed) as failed:
        call(conn, "SET @x = 1; SELECT no_such_column; SET @x = 2")
    assert failed.value.index == 1 and failed.value.error.args[0] == 1054
    assert len(used) == 2
