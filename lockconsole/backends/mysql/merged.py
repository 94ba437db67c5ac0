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
column (PyMySQL parses a description of every column). On MariaDB, decide's seven statements go
as one compound statement (`BEGIN NOT ATOMIC ... END`: the same statements, each still its own
autocommit transaction reading what committed before it started), which answers only its last
SELECT: about 0.1 ms of client CPU less an attempt than seven answers. MySQL has no anonymous
compound statement and gets the seven. The parameters are escaped by PyMySQL
(`Connection.escape` with its encoders, as its cursor does) and kept on the lock, by name, while
their value (and the session's escaping mode) stays the same: an attempt escapes only what
changed since the last, mostly its times.

Anything unusual (an error, an earlier attempt of the slot still "acquired") leaves `lock.held`
telling the truth and returns None: the runner goes on one statement at a time.
"""

from __future__ import annotations

import json
import logging
import re
from functools import cache
from typing import TYPE_CHECKING, Any

from lockconsole.backends import sqlfiles
from lockconsole.backends.ledger.timestamps import to_db
from lockconsole.backends.merged import LOST, SKIP_HELD, Finished, Merged, settle
from lockconsole.backends.mysql.lock import MysqlLock

if TYPE_CHECKING:
    from lockconsole.backends.ledger.store import Ledger
    from lockconsole.model.jobs import Run

log = logging.getLogger(__name__)
_PLACEHOLDER = re.compile(r"%\((\w+)\)s")
# pymysql.constants.SERVER_STATUS.SERVER_STATUS_NO_BACKSLASH_ESCAPES: the server's sql_mode
# decides how a string is escaped, so a kept literal is reused only under the same mode
_NO_BACKSLASH_ESCAPES = 512


def _last_row(cur: Any) -> tuple[Any, ...] | None:
    """The row of the last result set of a multi-statement call (every set is read)."""
    row = cur.fetchone() if cur.description else None
    while cur.nextset():
        if cur.description:
            row = cur.fetchone()
    return None if row is None else tuple(row)


@cache
def _template(name: str, compound: bool = False) -> tuple[str, tuple[str, ...]]:
    """A query file's text and the names of the parameters it uses, each once; with `compound`,
    its statements as one MariaDB compound statement (`BEGIN NOT ATOMIC ... END`)."""
    text = sqlfiles.load(name, "mysql")
    if compound:
        text = f"BEGIN NOT ATOMIC\n{text};\nEND"
    return text, tuple(dict.fromkeys(_PLACEHOLDER.findall(text)))


def _is_mariadb(conn: Any) -> bool:
    """The server is MariaDB (its version string says so), which runs compound statements."""
    try:
        return "mariadb" in str(conn.get_server_info()).lower()
    except Exception:
        return False


def _int(value: Any) -> int | None:
    """A number of a JSON answer (a MariaDB user variable comes back as text) as an int."""
    return None if value is None else int(value)


class MysqlMerged(Merged):
    """A GET_LOCK attempt in two round trips, on the lock's own connection."""

    def __init__(self, lock: MysqlLock) -> None:
        self.lock = lock

    def _call(self, name: str, params: dict[str, Any]) -> tuple[Any, ...] | None:
        with self.lock.conn.cursor() as cur:
            cur.execute(sqlfiles.load(name, "mysql"), params)
            return _last_row(cur)

    def _sql(self, name: str, params: dict[str, Any]) -> str:
        """The query file `name` with its parameters escaped in (see the module doc)."""
        conn = self.lock.conn
        text, names = _template(name, name == "decide_run" and _is_mariadb(conn))
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
        return text % escaped

    def _answer(self, name: str, params: dict[str, Any]) -> list[Any] | None:
        """The JSON array the call of `name` answers, or None when there was no answer."""
        with self.lock.conn.cursor() as cur:
            cur.execute(self._sql(name, params))
            row = _last_row(cur)
        if row is None or row[0] is None:
            return None
        answer = json.loads(row[0])
        return answer if isinstance(answer, list) else None

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
            answer = self._answer("decide_run", params)
        except (pymysql.MySQLError, OSError, ValueError) as exc:
            self._undecided(exc)
            return None
        if answer is None or len(answer) != 11:
            self._undecided(None)
            return None
        outcome, run_id, claim_id, message, unlocked, got, connection_id = answer[:7]
        row = (outcome, _int(run_id), claim_id, message)
        lock.session_id = int(connection_id)
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
                row = self._call("select_session_id", {})
            except (pymysql.MySQLError, OSError):
                row = None
            lock.session_id = None if row is None else int(row[0])
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
            answer = self._answer("finish_release_run", params)
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
