"""The run path's statements sent through libpq itself (psycopg's `pgconn`), in one pipeline.

An attempt sends two to five statements on its hot path (the try-lock, `decide_run`, the
finish). Through psycopg's cursors and pipeline mode each costs about 50 µs of client CPU in
generators, cursor set-up and result bookkeeping; sent here with the same parameter dumpers and
result loaders (psycopg's Transformer, so every value goes and comes back exactly as a cursor
would have it), a pipeline of two costs about a fifth of that. The round trips are the same:
every statement of one `exchange` travels in one write, ends in one Sync (one implicit
transaction when no transaction block is open) and is answered in one read.

On a direct connection (`mark_direct`: no pooler in between) each statement is prepared once
per connection under a name of ours and executed by name after; otherwise the unnamed statement
is used every time, which a transaction-mode pooler allows. psycopg itself never prepares on a
connection with a Wire: it drops all of its prepared statements with `DEALLOCATE ALL` after any
rollback, which would take ours with them. Should they go anyway (a `DEALLOCATE ALL` from
elsewhere), the failed execution makes the Wire forget its names and prepare again next time.

Waiting is a `poll` on the connection's socket with the GIL released, so a deadline on another
thread can cut the socket (engine/closing.py) and the wait ends with an OperationalError, as a
psycopg call would. A failure leaves the connection out of pipeline mode and either idle, in
the transaction the statements opened, or broken: the caller decides from there, as it would
after a failed cursor call.
"""

from __future__ import annotations

import re
import select
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from psycopg import adapt, errors, pq

from lockconsole.model.errors import DatabaseError

if TYPE_CHECKING:
    from psycopg import Connection

# imported by the PostgreSQL backends only, which have psycopg already
_OFF, _OK = pq.PipelineStatus.OFF, pq.ConnStatus.OK
_SYNC, _FAILED, _ABORTED = (
    pq.ExecStatus.PIPELINE_SYNC,
    pq.ExecStatus.FATAL_ERROR,
    pq.ExecStatus.PIPELINE_ABORTED,
)
_TUPLES, _TEXT = pq.ExecStatus.TUPLES_OK, pq.Format.TEXT

_PLACEHOLDER = re.compile(r"%\((\w+)\)s|%%|%")
_ATTRIBUTE = "_lockconsole_wire"  # where a connection keeps its Wire (collected with it)
_GONE_NAME = "26000"  # invalid_sql_statement_name: a prepared statement of ours is gone


# a statement ready to send: its sql, numbered text, dumped values, their types and formats
_Dumped = tuple[str, "Statement", Sequence[Any], tuple[int, ...], list[Any]]


class PlaceholderError(ValueError):
    """A statement uses a placeholder other than %(name)s (or a lone %)."""


@dataclass(frozen=True)
class Statement:
    """A statement's text with `$n` placeholders, and which parameter each number takes."""

    text: str
    names: tuple[str, ...]


@cache
def statement(sql: str) -> Statement:
    """`sql` with its %(name)s placeholders numbered in order of first use (%% is a %)."""
    names: list[str] = []

    def number(match: re.Match[str]) -> str:
        name = match.group(1)
        if name is None:
            if match.group(0) == "%%":
                return "%"
            raise PlaceholderError(f"unsupported placeholder at {match.start()}: {sql[:60]!r}")
        if name not in names:
            names.append(name)
        return f"${names.index(name) + 1}"

    return Statement(_PLACEHOLDER.sub(number, sql), tuple(names))


class Answer:
    """What an exchange brought back: each statement's first row (None when it had none) and
    the rows it affected, up to the first failure, and that failure (a psycopg.Error) if any."""

    __slots__ = ("counts", "error", "rows")

    def __init__(
        self,
        rows: list[tuple[Any, ...] | None],
        error: Exception | None,
        counts: list[int | None] | None = None,
    ) -> None:
        self.rows = rows
        self.error = error
        self.counts = counts or []

    def row(self, index: int) -> tuple[Any, ...] | None:
        """Statement `index`'s first row; None when it failed, was not reached or had none."""
        return self.rows[index] if index < len(self.rows) else None

    def checked(self) -> Answer:
        """This answer, or its failure raised (a psycopg.Error, as a cursor raises it)."""
        if self.error is not None:
            raise self.error
        return self

    def first(self, index: int, where: str, what: str) -> tuple[Any, ...]:
        """Statement `index`'s first row; its failure raised; a DatabaseError saying
        "`where`: `what` answered no row" when it had none."""
        row = self.checked().row(index)
        if row is None:
            raise DatabaseError(f"{where}: {what} answered no row")
        return row

    def count(self, index: int) -> int:
        """The rows statement `index` inserted, updated, deleted or returned (a cursor's
        rowcount); -1 when it failed or was not reached."""
        found = self.counts[index] if index < len(self.counts) else None
        return -1 if found is None else found


class Wire:
    """One psycopg connection's libpq pipeline, and the statements prepared on it."""

    def __init__(self, conn: Connection[Any]) -> None:
        if not conn.autocommit:  # a cursor would BEGIN first; the Wire's statements commit
            raise ValueError("the Wire sends on autocommit connections only")
        self._conn = conn
        self.pgconn = conn.pgconn
        # direct: prepare by name (mark_direct); psycopg prepares no more on this connection
        self.direct = conn.prepare_threshold is not None
        conn.prepare_threshold = None
        self._tx = adapt.Transformer.from_context(conn)
        self._auto = adapt.PyFormat.AUTO
        self._prepared: dict[tuple[str, tuple[int, ...]], bytes] = {}  # (sql, types) -> name
        self._made = 0  # names given so far (a prepare that failed does not give its name back)
        self._encoding = conn.info.encoding

    def exchange(self, statements: Sequence[tuple[str, Mapping[str, Any]]]) -> Answer:
        """Send `statements` ((sql, parameters) each) in one pipeline ending in one Sync; every
        answer is read. Raises psycopg.OperationalError when the connection fails; anything
        that stops the exchange half-way (an interrupt) closes the connection rather than leave
        answers unread on it."""
        pg, conn = self.pgconn, self._conn
        if pg is not conn.pgconn:
            raise RuntimeError("a Wire outlived its connection's libpq connection")
        with conn.lock:
            dumped = [self._dump(sql, params) for sql, params in statements]  # nothing sent yet
            try:
                sent = self._send(pg, dumped, named=self.direct)
                answer = self._read(pg, sent)
                pg.exit_pipeline_mode()
            except BaseException:
                _leave(conn, pg)
                raise
            return answer

    def _dump(self, sql: str, params: Mapping[str, Any]) -> _Dumped:
        """A statement and its parameters as they go on the wire (psycopg's own dumpers)."""
        stmt = statement(sql)
        values = [params[name] for name in stmt.names]
        tx = self._tx
        dumped = tx.dump_sequence(values, [self._auto] * len(values))
        return sql, stmt, dumped, tuple(tx.types or ()), list(tx.formats or ())

    def _send(
        self, pg: Any, statements: list[_Dumped], *, named: bool
    ) -> list[tuple[bytes, tuple[str, tuple[int, ...]]] | None]:
        """Queue every statement (a prepare first where needed) and the Sync; flush. The list
        says, per command sent, the name a prepare introduced (None for an execution)."""
        encoding = self._encoding
        sent: list[tuple[bytes, tuple[str, tuple[int, ...]]] | None] = []
        pending: dict[tuple[str, tuple[int, ...]], bytes] = {}  # prepared in this pipeline
        pg.enter_pipeline_mode()
        for sql, stmt, dumped, types, formats in statements:
            if named:
                key = (sql, types)
                name = self._prepared.get(key) or pending.get(key)
                if name is None:
                    name = pending[key] = b"lockconsole_%d" % self._made
                    self._made += 1
                    pg.send_prepare(name, stmt.text.encode(encoding), param_types=types)
                    sent.append((name, key))
                pg.send_query_prepared(name, dumped, param_formats=formats)
            else:
                pg.send_query_params(
                    stmt.text.encode(encoding),
                    dumped,
                    param_types=types,
                    param_formats=formats,
                    result_format=_TEXT,
                )
            sent.append(None)
        pg.pipeline_sync()
        while pg.flush():
            _wait(pg.socket, write=True)
        return sent

    def _read(
        self, pg: Any, sent: list[tuple[bytes, tuple[str, tuple[int, ...]]] | None]
    ) -> Answer:
        """Read every command's result up to the Sync; prepares that took are remembered."""
        tx = self._tx
        rows: list[tuple[Any, ...] | None] = []
        counts: list[int | None] = []
        error: Exception | None = None
        index = 0
        while True:
            while pg.is_busy():
                _wait(pg.socket)
                pg.consume_input()
            res = pg.get_result()
            if res is None:
                if pg.status != _OK:
                    raise errors.OperationalError(pg.get_error_message(self._encoding))
                continue
            status = res.status
            if status == _SYNC:
                break
            command = sent[index] if index < len(sent) else None
            index += 1
            if status == _FAILED:
                if error is None:
                    error = errors.error_from_result(res, encoding=self._encoding)
                    if error.sqlstate == _GONE_NAME:  # our names were dropped: prepare again
                        self._prepared.clear()
                continue
            if status == _ABORTED or error is not None:
                continue
            if command is not None:  # a prepare that took
                name, key = command
                self._prepared[key] = name
                continue
            counts.append(res.command_tuples)
            if status == _TUPLES and res.ntuples:
                tx.set_pgresult(res)
                rows.append(tx.load_row(0, tuple))
            else:
                rows.append(None)
        tx.set_pgresult(None)
        return Answer(rows, error, counts)


def _leave(conn: Connection[Any], pg: Any) -> None:
    """After an exchange stopped half-way: out of pipeline mode if nothing is left unread, else
    the connection closed (a later statement must never read an earlier one's answer)."""
    if pg.status != _OK or pg.pipeline_status == _OFF:
        return
    try:
        pg.exit_pipeline_mode()
    except Exception:
        conn.close()


def wire_for(conn: Connection[Any]) -> Wire:
    """The Wire of `conn`, made on first use and kept on the connection (it goes with it)."""
    wire: Wire | None = getattr(conn, _ATTRIBUTE, None)
    if wire is None or wire.pgconn is not conn.pgconn:
        wire = Wire(conn)
        setattr(conn, _ATTRIBUTE, wire)
    return wire


def mark_direct(conn: Connection[Any]) -> None:
    """`conn` reaches the server with no pooler in between: its Wire prepares by name."""
    wire_for(conn).direct = True


def _wait(fd: int, *, write: bool = False) -> None:
    """Wait (GIL released) until the socket can be read, or written too with `write`."""
    poller = select.poll()
    poller.register(fd, _WRITE if write else _READ)
    poller.poll()


_READ = select.POLLIN | select.POLLERR | select.POLLHUP
_WRITE = _READ | select.POLLOUT
