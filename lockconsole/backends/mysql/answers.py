"""A merged call's answers read straight off the MySQL protocol, for the run path.

The run path sends two calls per attempt on the lock's own connection (backends/mysql/merged.py)
and wants one thing back from each: the first row of the last result set (its JSON answer).
PyMySQL, which is pure Python, builds a packet object, a field description and a result object
for every answer, about 0.1 ms of the client's CPU per attempt on this path. Here the same
packets are read with PyMySQL's own socket reader (`Connection._read_bytes`: its read timeout,
its "lost connection" errors, its close on a broken read) and only what is needed is parsed:
each answer's kind, its status flags, and the row wanted. An error answer is raised as PyMySQL
raises it (`pymysql.err.raise_mysql_exception`), with the index of the answer it replaced,
because an error ends a multi-statement call there: nothing after it ran.

Everything else stays PyMySQL's: the query is sent by `Connection._execute_command`, and the
connection's `server_status` (which decides how strings are escaped) is kept as each answer
sets it. The text protocol is read as PyMySQL asks for it (no CLIENT_DEPRECATE_EOF: a result
set's column definitions and rows each end with an EOF packet); a connection that asked for
DEPRECATE_EOF (a PyMySQL that learnt it), or a PyMySQL without the reader used here, is read
through PyMySQL's cursor instead.
"""

from __future__ import annotations

from typing import Any

_OK, _EOF, _ERR, _LOCAL_INFILE, _NULL = 0x00, 0xFE, 0xFF, 0xFB, 0xFB
_MORE_RESULTS = 0x0008  # SERVER_MORE_RESULTS_EXISTS: another answer follows this one
_LONGEST = 0xFFFFFF  # a packet this long continues in the next
_COM_QUERY = 3
_DEPRECATE_EOF = 1 << 24  # CLIENT_DEPRECATE_EOF: result sets without their EOF packets
# what the reader uses of PyMySQL's Connection (private, so checked rather than assumed)
_USED = ("_execute_command", "_read_bytes", "_force_close")


_READABLE: dict[type, bool] = {}  # by connection class, asked once


def readable(connection_class: type) -> bool:
    """This PyMySQL's connections have the reader `call` uses (else their cursor reads)."""
    known = _READABLE.get(connection_class)
    if known is None:
        known = all(callable(getattr(connection_class, name, None)) for name in _USED)
        _READABLE[connection_class] = known
    return known


class CallFailed(Exception):
    """A call's error answer (`error`, as PyMySQL raises it) and the index of the answer it
    replaced: the statements before it ran, the ones after did not."""

    def __init__(self, index: int, error: BaseException) -> None:
        super().__init__(index, error)
        self.index, self.error = index, error


def _length(data: bytes, at: int) -> tuple[int, int]:
    """A length-encoded integer at `at`: (its value, the offset after it)."""
    first = data[at]
    if first < 0xFB:
        return first, at + 1
    if first == 0xFC:
        return data[at + 1] | data[at + 2] << 8, at + 3
    if first == 0xFD:
        return data[at + 1] | data[at + 2] << 8 | data[at + 3] << 16, at + 4
    return int.from_bytes(data[at + 1 : at + 9], "little"), at + 9


def _row(data: bytes, encoding: str) -> tuple[str | None, ...]:
    """A text-protocol row: each column's value as text, None for NULL."""
    values: list[str | None] = []
    at, end = 0, len(data)
    while at < end:
        if data[at] == _NULL:
            values.append(None)
            at += 1
            continue
        size, at = _length(data, at)
        values.append(data[at : at + size].decode(encoding))
        at += size
    return tuple(values)


def call(conn: Any, sql: str) -> tuple[str | None, ...] | None:
    """Send `sql` (one or more statements) on PyMySQL connection `conn` and read every answer:
    the first row of the last result set (None if no statement returned a row), or CallFailed."""
    from pymysql import err
    from pymysql.constants import CR

    if conn.client_flag & _DEPRECATE_EOF or not readable(type(conn)):
        return _by_cursor(conn, sql)
    conn._execute_command(_COM_QUERY, sql)
    # as PyMySQL's own reader sets it (one that does not keep _current_timeout sets it always)
    if getattr(conn, "_current_timeout", None) != conn._read_timeout or conn._read_timeout is None:
        conn._sock.settimeout(conn._read_timeout)
        conn._current_timeout = conn._read_timeout
    read = conn._read_bytes

    def packet() -> bytes:
        parts = []
        while True:
            header = read(4)
            size = header[0] | header[1] << 8 | header[2] << 16
            if header[3] != conn._next_seq_id:
                conn._force_close()
                raise err.OperationalError(
                    CR.CR_SERVER_LOST, "Lost connection to MySQL server during query"
                )
            conn._next_seq_id = (header[3] + 1) % 256
            parts.append(read(size))
            if size < _LONGEST:
                return parts[0] if len(parts) == 1 else b"".join(parts)

    def failed(index: int, data: bytes) -> CallFailed:
        try:
            err.raise_mysql_exception(data)
        except err.MySQLError as exc:
            return CallFailed(index, exc)
        return CallFailed(index, err.InternalError("an error answer without an error"))

    index, wanted = 0, None
    try:
        while True:
            data = packet()
            kind = data[0]
            if kind == _ERR:
                raise failed(index, data)
            if kind == _OK:
                _, at = _length(data, 1)  # affected rows
                _, at = _length(data, at)  # last insert id
                status = data[at] | data[at + 1] << 8
            elif kind == _LOCAL_INFILE:  # never asked for: a stream we cannot follow
                conn._force_close()
                raise err.OperationalError(CR.CR_SERVER_LOST, "unexpected LOCAL INFILE request")
            else:
                columns, _ = _length(data, 0)
                for _ in range(columns):
                    packet()  # a column definition
                packet()  # the EOF after them
                first = None
                while True:
                    data = packet()
                    if data[0] == _ERR:
                        raise failed(index, data)
                    if data[0] == _EOF and len(data) < 9:
                        status = data[3] | data[4] << 8
                        break
                    if first is None:
                        first = data
                wanted = first  # decoded once every answer is read
            conn.server_status = status
            index += 1
            if not status & _MORE_RESULTS:
                break
    except (CallFailed, err.MySQLError):
        raise  # an error answer ends the call there; a lost connection is closed already
    except BaseException:  # stopped half-way through the answers: out of step, never reused
        conn._force_close()
        raise
    return None if wanted is None else _row(wanted, conn.encoding)


def _by_cursor(conn: Any, sql: str) -> tuple[str | None, ...] | None:
    """call() through PyMySQL's cursor: the same answer (every value as text), the same
    CallFailed."""
    from pymysql import err

    index, row = 0, None
    with conn.cursor() as cur:
        try:
            cur.execute(sql)
            while True:
                if cur.description:
                    found = cur.fetchone()
                    row = None if found is None else tuple(_text(v) for v in found)
                index += 1
                if not cur.nextset():
                    return row
        except err.MySQLError as exc:
            raise CallFailed(index, exc) from None


def _text(value: Any) -> str | None:
    """A cursor's value as the text protocol sent it."""
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, bytes | bytearray):
        return bytes(value).decode()
    return str(value)
