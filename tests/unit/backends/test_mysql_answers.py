"""The MySQL protocol the run path's answer reader parses itself (backends/mysql/answers.py):
length-encoded integers, text-protocol rows, and whole calls read from packets built here as the
server sends them (a connection stand-in with PyMySQL's reader interface): a long row whose
length prefix starts with 0xFE (not an EOF), packets continued past 16 MiB, an error in the
middle of a result set, a broken sequence, and a reader stopped half-way."""

from __future__ import annotations

from typing import Any

import pytest
from pymysql import err

from lockconsole.backends.mysql import merged
from lockconsole.backends.mysql.answers import CallFailed, _length, _row, call, readable

MORE = 0x0008  # SERVER_MORE_RESULTS_EXISTS


def _lenenc(value: int) -> bytes:
    if value < 0xFB:
        return bytes([value])
    if value < 1 << 16:
        return b"\xfc" + value.to_bytes(2, "little")
    if value < 1 << 24:
        return b"\xfd" + value.to_bytes(3, "little")
    return b"\xfe" + value.to_bytes(8, "little")


@pytest.mark.parametrize("value", [0, 1, 250, 251, 0xFFFF, 0x10000, 0xFFFFFF, 0x1000000, 2**63])
def test_a_length_encoded_integer_reads_back_with_the_offset_after_it(value):
    data = b"\x07" + _lenenc(value) + b"tail"
    assert _length(data, 1) == (value, len(data) - 4)


def test_a_row_reads_text_nulls_empties_and_long_values_exactly():
    odd = "wéb-1 \"q\" 'x' \\ \t\x01\x1f\x7f\ufeff ☃ 😀"
    long = "x" * 70000  # its length takes three bytes
    values = [odd, None, "", long, "[1, null]"]
    data = b"".join(b"\xfb" if v is None else _lenenc(len(v.encode())) + v.encode() for v in values)
    assert _row(data, "utf8") == tuple(values)


def _ok(status: int = 0) -> bytes:
    return b"\x00\x00\x00" + status.to_bytes(2, "little") + b"\x00\x00"


def _eof(status: int = 0) -> bytes:
    return b"\xfe\x00\x00" + status.to_bytes(2, "little")


def _error(code: int, message: str) -> bytes:
    return b"\xff" + code.to_bytes(2, "little") + b"#42S22" + message.encode()


def _result(rows: list[list[str | None]], status: int = 0) -> list[bytes]:
    columns = len(rows[0]) if rows else 1
    body = [
        b"".join(b"\xfb" if v is None else _lenenc(len(v.encode())) + v.encode() for v in row)
        for row in rows
    ]
    return [_lenenc(columns), *[b"\x03def" for _ in range(columns)], _eof(), *body, _eof(status)]


class _Conn:
    """PyMySQL's reader interface over packets given here (the sequence ids added)."""

    encoding = "utf8"
    client_flag = 0
    _read_timeout = _current_timeout = 10.0

    def __init__(self, payloads: list[bytes], *, break_sequence_at: int | None = None) -> None:
        wire = bytearray()
        seq = 1
        for n, payload in enumerate(payloads):
            while True:  # a payload of 16 MiB - 1 or more continues in the next packet
                part, payload = payload[:0xFFFFFF], payload[0xFFFFFF:]
                number = 7 if n == break_sequence_at else seq
                wire += len(part).to_bytes(3, "little") + bytes([number]) + part
                seq = (seq + 1) % 256
                if len(part) < 0xFFFFFF:
                    break
        self._wire, self._at = bytes(wire), 0
        self.server_status, self.closed = 0, False
        self.sent: list[str] = []

    def _execute_command(self, command: int, sql: str) -> None:
        self.sent.append(sql)
        self._next_seq_id = 1

    def _read_bytes(self, n: int) -> bytes:
        data = self._wire[self._at : self._at + n]
        self._at += n
        if len(data) < n:
            self.closed = True
            raise err.OperationalError(2013, "Lost connection to MySQL server during query")
        return data

    def _force_close(self) -> None:
        self.closed = True


def test_a_long_row_whose_length_starts_with_fe_is_a_row_not_an_eof_and_spans_packets():
    value = "é" * (9 * 1024 * 1024)  # 18 MiB of UTF-8: an 8-byte length (0xFE) and two packets
    conn: Any = _Conn([_ok(MORE), *_result([[value, None]])])
    assert call(conn, "DO 1; SELECT x") == (value, None)
    assert conn._at == len(conn._wire) and not conn.closed


def test_the_last_result_set_is_the_answer_and_the_status_is_kept():
    conn: Any = _Conn([*_result([["1"], ["2"]], MORE), _ok(MORE | 512), *_result([["3"]], 512)])
    assert call(conn, "SELECT 1 UNION SELECT 2; SET x; SELECT 3") == ("3",)
    assert conn.server_status == 512  # as the last answer left it (here: NO_BACKSLASH_ESCAPES)


def test_an_error_in_the_middle_of_a_result_set_names_its_statement():
    rows = _result([["1"]], MORE)
    conn: Any = _Conn([_ok(MORE), *rows[:-1], _error(1054, "Unknown column")])
    with pytest.raises(CallFailed) as failed:
        call(conn, "DO 1; SELECT broken")
    assert failed.value.index == 1 and failed.value.error.args[0] == 1054
    assert not conn.closed  # the server ended the call there: the connection goes on


def test_a_broken_sequence_closes_the_connection():
    conn: Any = _Conn([_ok(MORE), _ok()], break_sequence_at=1)
    with pytest.raises(err.OperationalError):
        call(conn, "DO 1; DO 2")
    assert conn.closed


def test_a_reader_stopped_half_way_closes_the_connection_it_left_out_of_step():
    conn: Any = _Conn([b"\x00\x00", _ok()])  # an OK packet cut short: its status is missing
    with pytest.raises(IndexError):
        call(conn, "DO 1")
    assert conn.closed


def test_an_undecodable_answer_read_to_its_end_leaves_the_connection_in_step():
    bad = b"\x02\xff\xfe"  # a 2-byte column that is not UTF-8
    conn: Any = _Conn([_lenenc(1), b"\x03def", _eof(), bad, _eof(MORE), _ok()])
    with pytest.raises(UnicodeDecodeError):
        call(conn, "SELECT x; DO 1")
    assert conn._at == len(conn._wire) and not conn.closed


@pytest.mark.parametrize("name", ["decide_run", "decide_run:probed", "finish_release_run"])
def test_each_prepared_statement_gets_as_many_values_as_it_has_placeholders(name):
    prepared = merged._prepared(name)
    executes = prepared.execute.split(";\n")
    assert len(executes) == len(prepared.statements)
    for (ps, text), execute in zip(prepared.statements, executes, strict=True):
        assert execute.startswith(f"EXECUTE {ps} USING ")
        assert text.count("?") == execute.count("%(")


def test_only_a_pymysql_with_the_reader_used_is_read_directly():
    import pymysql

    class Bare:  # a PyMySQL that renamed its reader
        def _execute_command(self, command: int, sql: str) -> None: ...

    assert readable(pymysql.connections.Connection)  # the installed PyMySQL has it
    assert readable(_Conn) and not readable(Bare)
