"""The run path in two round trips on MySQL/MariaDB, on the lock's own connection.

GET_LOCK is held by a connection, and the ledger lives in the same database, so the attempt's
statements ride the lock's connection, sent together (the connection allows several statements
per call) and committed one by one (autocommit):

- **decide and record** (`decide_run_mysql.sql`): GET_LOCK, the probe of the UPDATE privilege,
  the verdict (the slot's claim read after the lock was taken, and the job's pause), the INSERT
  of "acquired" or "skipped", and RELEASE_LOCK when the slot already succeeded or the job is
  paused (the paused attempt is then recorded in the pause's words);
- **finish and release** (`finish_release_run_mysql.sql`): the conditional outcome UPDATE, which
  makes the lock's last check (IS_USED_LOCK = CONNECTION_ID()) itself and is committed on its
  own, then the same check again and RELEASE_LOCK.

The client's CPU is spent mostly reading answers, so they are few and small: each statement's
result is a packet the client wakes up for, and each call's answer is one JSON array in one
column, read off the protocol by `answers.call` (PyMySQL's socket reader, none of its result
objects). On MariaDB, decide's seven statements go as one compound statement (`BEGIN NOT ATOMIC
... END`: the same statements, each still its own autocommit transaction reading what committed
before it started), which answers only its last SELECT; MySQL has no anonymous compound
statement and gets the seven. The probe of the UPDATE privilege runs with a connection's decides
until it passed once (`decide_run:probed` is decide without it): a role's privileges do not
change under a connection in the normal course, and the probe is a statement of its own.

On MariaDB each call is prepared once per connection (PREPARE name FROM '...' with a ? per
parameter, sent with the first EXECUTE in the same round trip) and executed by name after
(EXECUTE name USING <literals>; MySQL takes only user variables there and keeps the text): the
server then no longer parses the compound statement on every attempt, about 0.1 ms of its time.
An error ends a multi-statement call where it happens, so a refused PREPARE, or a first EXECUTE
whose statement was deallocated behind our back, has run nothing: the first makes the
connection send text from then on, the second prepares again. The parameters are escaped by
PyMySQL (`Connection.escape` with its encoders, as its cursor does) and kept on the lock, by
name, while their value (and the session's escaping mode) stays the same: an attempt escapes
only what changed since the last, mostly its times.

Anything unusual (an error, an earlier attempt of the slot still "acquired") leaves `lock.held`
telling the truth and returns None: the runner goes on one statement at a time.
"""

from __future__ import annotations

import json
import logging
import re
from dataclasses import dataclass
from functools import cache
from typing import TYPE_CHECKING, Any

from lockconsole.backends import sqlfiles
from lockconsole.backends.ledger.timestamps import to_db
from lockconsole.backends.merged import LOST, SKIP_HELD, Finished, Merged, settle
from lockconsole.backends.mysql import answers
from lockconsole.backends.mysql.lock import MysqlLock

if TYPE_CHECKING:
    from lockconsole.backends.ledger.store import Ledger
    from lockconsole.model.jobs import Run

log = logging.getLogger(__name__)
_PLACEHOLDER = re.compile(r"%\((\w+)\)s")
# pymysql.constants.SERVER_STATUS.SERVER_STATUS_NO_BACKSLASH_ESCAPES: the server's sql_mode
# decides how a string is escaped, so a kept literal is reused only under the same mode
_NO_BACKSLASH_ESCAPES = 512
# decide_run's probe of the UPDATE privilege: its marker line and its statement
_PROBE = re.compile(r"^-- \[probe\][^\n]*\n[^;]*;\n", re.M)
_STATEMENT_END = re.compile(r";[ \t]*\n")  # the end of a statement in a query file
_UNKNOWN_STATEMENT = 1243  # ER_UNKNOWN_STMT_HANDLER: no prepared statement of that name
# refused before it ran by a server that cannot run the EXECUTE as sent: a parse error (an old
# MariaDB without expressions in USING), wrong arguments, not in the prepared protocol
_UNPREPARABLE = frozenset({1064, 1210, 1295})


@cache
def _template(name: str, compound: bool = False) -> tuple[str, tuple[str, ...]]:
    """A query file's text and the names of the parameters it uses, each once; with `compound`,
    its statements as one MariaDB compound statement (`BEGIN NOT ATOMIC ... END`).
    `decide_run:probed` is decide_run without its probe of the UPDATE privilege."""
    query, _, variant = name.partition(":")
    text = sqlfiles.load(query, "mysql")
    if variant == "probed":
        text = _PROBE.sub("", text)
    if compound:
        text = f"BEGIN NOT ATOMIC\n{text};\nEND"
    return text, tuple(dict.fromkeys(_PLACEHOLDER.findall(text)))


def _compound(name: str) -> bool:
    """Query `name` goes as one compound statement on MariaDB (decide_run does)."""
    return name.startswith("decide_run")


def _is_mariadb(conn: Any) -> bool:
    """The server is MariaDB (its version string says so), which runs compound statements."""
    try:
        return "mariadb" in str(conn.get_server_info()).lower()
    except Exception:
        return False


@dataclass(frozen=True)
class _Prepared:
    """Query `name`'s statements as MariaDB prepares them (see `_prepared`)."""

    statements: tuple[tuple[str, str], ...]  # (prepared name, text with a ? per placeholder)
    execute: str  # the EXECUTEs, their USING lists as %(name)s, a name given again where reused
    names: tuple[str, ...]  # the parameters, each once


@cache
def _prepared(name: str) -> _Prepared:
    """The statements of query `name` to prepare on MariaDB (decide_run: its one compound
    statement), each named after the query, and the EXECUTEs that run them."""
    compound = _compound(name)
    text, names = _template(name, compound)
    parts = [text] if compound else [p for p in _STATEMENT_END.split(text) if p.strip()]
    statements, executes = [], []
    for i, part in enumerate(parts):
        prepared = f"lockconsole_{name.replace(':', '_')}_{i}"
        statements.append((prepared, _PLACEHOLDER.sub("?", part).replace("%%", "%")))
        order = [f"%({n})s" for n in _PLACEHOLDER.findall(part)]
        using = f" USING {', '.join(order)}" if order else ""
        executes.append(f"EXECUTE {prepared}{using}")
    return _Prepared(tuple(statements), ";\n".join(executes), names)


def _refused(exc: BaseException) -> bool:
    """The server answered an error (an ERR packet), as opposed to the client losing it."""
    code = exc.args[0] if exc.args else None
    return isinstance(code, int) and not 2000 <= code < 3000  # 2xxx: the client's own errors


def _json(row: tuple[Any, ...] | None) -> list[Any] | None:
    """The JSON array in a merged call's answer row, or None when there was none."""
    if row is None or row[0] is None:
        return None
    answer = json.loads(row[0])
    return answer if isinstance(answer, list) else None


def _int(value: Any) -> int | None:
    """A number of a JSON answer (a MariaDB user variable comes back as text) as an int."""
    return None if value is None else int(value)


class MysqlMerged(Merged):
    """A GET_LOCK attempt in two round trips, on the lock's own connection."""

    def __init__(self, lock: MysqlLock) -> None:
        self.lock = lock

    def _literals(self, names: tuple[str, ...], params: dict[str, Any]) -> dict[str, str]:
        """Each of `names` escaped as a literal, kept while it stays the same (module doc)."""
        conn = self.lock.conn
        literals = self.lock.literals
        mode = getattr(conn, "server_status", 0) & _NO_BACKSLASH_ESCAPES  # as escape() reads it
        escaped = {}
        for key in names:
            value = params[key]
            known = literals.get(key)
            if (
                known is not None
                and known[1] == mode
                and type(known[0]) is type(value)
                and known[0] == value
            ):
                escaped[key] = known[2]
            else:
                escaped[key] = literal = conn.escape(value, conn.encoders)
                literals[key] = (value, mode, literal)
        return escaped

    def _sql(self, name: str, params: dict[str, Any]) -> str:
        """The query file `name` with its parameters escaped in (see the module doc)."""
        text, names = _template(name, _compound(name) and _is_mariadb(self.lock.conn))
        return text % self._literals(names, params)

    def _answer(self, name: str, params: dict[str, Any]) -> list[Any] | None:
        """The JSON array the call of `name` answers, or None when there was no answer."""
        try:
            return _json(answers.call(self.lock.conn, self._sql(name, params)))
        except answers.CallFailed as failed:
            raise failed.error from None

    def _prepared_answer(self, name: str, params: dict[str, Any]) -> list[Any] | None:
        """The JSON array of `name`, its statements prepared once per connection (MariaDB; see
        the module doc), or sent as text where they cannot be."""
        lock, conn = self.lock, self.lock.conn
        if not lock.preparing or not _is_mariadb(conn):
            return self._answer(name, params)
        prepared = _prepared(name)
        execute = prepared.execute % self._literals(prepared.names, params)
        for _ in range(2):
            prepares = []
            if name not in lock.prepared:
                prepares = [
                    f"PREPARE {ps} FROM {conn.escape(text)};\n" for ps, text in prepared.statements
                ]
            try:
                row = answers.call(conn, "".join(prepares) + execute)
            except answers.CallFailed as failed:
                exc, index = failed.error, failed.index
                # an error ends a multi-statement call where it happens: the statements after
                # it never ran, so a refused PREPARE, or a first EXECUTE that finds no prepared
                # statement, has tried and recorded nothing
                if not _refused(exc) or not conn.open:
                    raise exc from None
                code = exc.args[0]
                if index < len(prepares) or (index == len(prepares) and code in _UNPREPARABLE):
                    # a PREPARE refused, or the first EXECUTE of what was just prepared refused
                    # as something this server cannot run (a USING it does not parse): text
                    # from now on on this connection
                    log.debug("%s cannot be prepared here: %s", name, exc)
                    lock.preparing = False
                    return self._answer(name, params)
                if code == _UNKNOWN_STATEMENT:  # deallocated behind our back
                    lock.prepared.discard(name)  # prepared again next time, whatever ran now
                    if index == 0:  # nothing ran: prepare and run it now
                        continue
                raise exc from None
            lock.prepared.add(name)
            return _json(row)
        return None

    def decide(self, ledger: Ledger, run: Run, *, claims: bool) -> Run | None:
        import pymysql

        lock = self.lock
        if lock.held or lock.gone():
            return None
        params = ledger.insert_params(run)
        now = ledger.now()
        params.update(
            name=lock.name,
            claims=claims,
            held_message=SKIP_HELD,
            finished_at=to_db(now, "mysql"),
            finished=now,
        )
        try:
            # the probe of the UPDATE privilege runs until it passed once on this connection
            query = "decide_run:probed" if lock.probed else "decide_run"
            answer = self._prepared_answer(query, params)
        except (pymysql.MySQLError, OSError, ValueError) as exc:
            self._undecided(exc)
            return None
        if answer is None or len(answer) != 11:
            self._undecided(None)
            return None
        outcome, run_id, claim_id, message, unlocked, got, connection_id = answer[:7]
        row = (outcome, _int(run_id), claim_id, message)
        lock.session_id = int(connection_id)
        lock.probed = True  # the whole call ran: the probe passed
        if got is None:  # the server refused the name: the one-statement path says why
            return None
        took = int(got) == 1 and not _int(unlocked)
        lock.held = took

        def slot_done() -> None:  # decide_run let the lock go, unless it had gone meanwhile
            if took:
                lock.lost_on_release = True

        return settle(
            ledger,
            run,
            row,
            params,
            pause_row=tuple(answer[7:11]),
            let_go=lock.release,
            session_id=lock.session_id,
            slot_done=slot_done,
        )

    def _undecided(self, exc: BaseException | None) -> None:
        """After a failed call: lock.held as the server says, or a DatabaseError if it is gone."""
        import pymysql

        lock = self.lock
        if lock.gone():
            lock.held = False
            raise lock.failure(f"GET_LOCK({lock.name!r}, 0)", exc or OSError("no answer"))
        lock.held = True
        lock.held = lock.still_held()
        if lock.held and lock.session_id is None:  # the attempt's row names the holding session
            try:
                row = answers.call(lock.conn, sqlfiles.load("select_session_id", "mysql"))
            except (pymysql.MySQLError, OSError, answers.CallFailed):
                row = None
            lock.session_id = None if row is None or row[0] is None else int(row[0])
        log.debug("decide_run failed, going on one statement at a time: %s", exc)

    def finish(
        self,
        ledger: Ledger,
        run: Run,
        outcome: str,
        *,
        exit_code: int | None,
        message: str | None,
    ) -> Finished | None:
        import pymysql

        lock = self.lock
        if not lock.held or lock.gone():
            return None
        params = ledger.finish_params(run, outcome, exit_code=exit_code, message=message)
        params.update(name=lock.name, lost_message=params["message"] or LOST)
        try:
            answer = self._prepared_answer("finish_release_run", params)
        except (pymysql.MySQLError, OSError, ValueError) as exc:
            log.debug("finish_release_run failed, going on one statement at a time: %s", exc)
            return None
        if answer is None or len(answer) != 2:
            return None
        changed, unlocked = int(answer[0]), _int(answer[1])
        held, released = unlocked is not None, bool(unlocked)  # RELEASE_LOCK ran iff it was held
        if not held:
            lock.held, lock.lost_on_release = False, True
        elif released:
            lock.held = False
        written = (outcome if held else "lock_lost") if changed == 1 else None
        return Finished(held, written, released)
