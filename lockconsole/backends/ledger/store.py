"""The run ledger: every attempt of every job on every instance, in one shared table.

Each attempt is one row of `lockconsole_runs` (a `models.Run`): the instance that tried, the
slot it tried to run, and what happened (skipped, acquired, then succeeded / failed / lock_lost).

The table is defined once with SQLAlchemy Core (`schema()`) and created on first use with
`metadata.create_all` on PostgreSQL, MySQL/MariaDB and SQLite. Timestamps are stored as UTC:
`timestamptz` on PostgreSQL, naive-UTC `DATETIME(6)` on MySQL/MariaDB, and fixed-width text
`YYYY-MM-DD HH:MM:SS.ffffff` (UTC) on SQLite: microseconds kept, sorted right. The API takes
aware datetimes (a naive one is refused with ValueError) and returns aware UTC ones.

The runner's writes (`record`, `finish`, `slot_claim`) go through a raw, autocommit DB-API
connection with the SQL in `backends/queries/` and do not import SQLAlchemy (that would cost a cron
job ~200 ms of cold start). Only when a write finds no table does the ledger import SQLAlchemy,
create the schema, and retry. If the connection dropped between calls (a server restart, a killed
session) the statement is retried once on a new connection. The report reads (`runs`, `slot_runs`)
use SQLAlchemy Core. Its times are the server's (`now`, clock.py).
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from lockconsole.backends import sqlfiles
from lockconsole.backends.connect import connect, first_line, prepare_if_direct, socket_fd_of
from lockconsole.backends.errors import classify
from lockconsole.backends.ledger import clock, reads
from lockconsole.backends.ledger.messages import MAX_MESSAGE, truncate  # noqa: F401  (public here)
from lockconsole.backends.ledger.messages import grant_hint as _grant_hint
from lockconsole.backends.ledger.schema import TABLE, ensure, schema  # noqa: F401  (TABLE: public)
from lockconsole.backends.ledger.timestamps import from_db, to_db
from lockconsole.config.urls import scrub
from lockconsole.model.construct import construct
from lockconsole.model.errors import DatabaseError, LedgerDenied, RunClosedError
from lockconsole.model.jobs import RUN_COLUMNS, Database, Run, evolve

OUTCOMES = ("skipped", "paused", "acquired", "succeeded", "failed", "lock_lost")
FINAL_OUTCOMES = ("succeeded", "failed", "lock_lost")
COLUMNS = tuple(column.name for column in RUN_COLUMNS)
_INSERT_COLUMNS = tuple(column.name for column in RUN_COLUMNS if column.type != "id")
_IDLE = 0  # psycopg.pq.TransactionStatus.IDLE (libpq's PQTRANS_IDLE), without importing it
_TIME_COLUMNS = tuple(column.name for column in RUN_COLUMNS if column.type == "time")


def _new_id(cur: Any) -> Any:
    return cur.fetchone()[0] if cur.description else getattr(cur, "lastrowid", None)


def _row_to_run(row: Any) -> Run:
    values = dict(zip(COLUMNS, row, strict=True))
    for name in _TIME_COLUMNS:
        values[name] = from_db(values[name])
    return Run(**values)


class Ledger:
    """Write and read the run ledger of one database; close() (or `with`) when done."""

    def __init__(
        self,
        database: Database,
        *,
        application_name: str = "lockconsole-ledger",
        timeouts: Any = None,
        read_only: bool = False,
    ) -> None:
        self.database = database
        self.read_only = read_only  # reads never create or alter a table (`present` says what is)
        self.present: set[str] | None = None  # read-only: the table's columns; None: no table
        self.timeouts = timeouts  # connect.Timeouts of the reads' engine (the console's), or None
        self.url = database.url
        self.dialect: str = database.url.dialect
        self.clock_key = clock.server_key(self.dialect, self.url)  # whose clock now() reads
        self.application_name = application_name
        self._conn: Any = None
        self._borrowed = False  # _conn is another object's (a lock's): close() leaves it open
        self._engine: Any = None
        self.schema_checked = False
        self._ports_seen = False  # the write connection's ports were looked at (insert_run)
        self.finish_allowed = False  # this role may UPDATE the ledger (probe_finish_run)
        self._finished_at: tuple[int | None, datetime | None] = (None, None)  # finish_params'

    # connections

    @property
    def connection(self) -> Any:
        """The raw autocommit DB-API connection of the writes, opened on first use."""
        if self._conn is None:
            self._conn = connect(
                self.url, application_name=self.application_name, timeouts=self.timeouts
            )
            self._ports_seen = False
        return self._conn

    def borrow(self, conn: Any) -> None:
        """Write on `conn` (an autocommit connection to this database that another object owns),
        unless the ledger already has a connection of its own."""
        if self._conn is None:
            self._conn, self._borrowed = conn, True
            self._ports_seen = False

    def socket_fd(self) -> int | None:
        """The socket of the ledger's own open write connection; None when unopened, borrowed
        (the lock's) or without a socket (SQLite)."""
        if self._conn is None or self._borrowed or self.dialect == "sqlite":
            return None
        return socket_fd_of(self._conn)

    def reusable(self) -> bool:
        """True when the write connection is unopened, or open, healthy and idle."""
        conn = self._conn
        if conn is None:
            return True
        if self._borrowed:
            return False
        if self.dialect == "postgresql":
            idle = conn.pgconn.transaction_status == _IDLE
            return bool(idle and not (conn.closed or conn.broken))
        if self.dialect == "mysql":
            return bool(conn.open)
        return True

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if self._borrowed:
            conn, self._borrowed = None, False
        if conn is not None:
            try:
                conn.close()
            except Exception:  # closing a dead connection is not an error
                pass
        engine, self._engine = self._engine, None
        if engine is not None:
            engine.dispose()

    def __enter__(self) -> Ledger:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def now(self) -> datetime:
        """The ledger server's time now (ledger/clock.py): the one clock of the ledger's times."""
        return clock.now(self)

    def server_time(self) -> Any:
        """The server's clock, on a connection already open (the reads' engine in a console)."""
        if self._conn is None and self._engine is not None:
            with self._engine.connect() as conn:
                return conn.exec_driver_sql(
                    sqlfiles.load("select_server_time", self.dialect)
                ).scalar()
        return self.fetch_one("select_server_time", {})[0]

    # writes (raw driver, no SQLAlchemy)

    def record(self, run: Run) -> Run:
        """Insert one attempt (normally "skipped" or "acquired"); the Run comes back with its id."""
        if run.outcome not in OUTCOMES:
            raise ValueError(f"unknown outcome {run.outcome!r} (expected one of {OUTCOMES})")
        message = truncate(run.message)
        if message is not run.message:
            run = evolve(run, message=message)
        if run.outcome == "acquired" and not self.finish_allowed:
            # before a job may run: can this role close the attempt it is about to open?
            self._execute("probe_finish_run", {}, lambda cur: None)
            self.finish_allowed = True
        params = self.insert_params(run)
        if self.dialect == "postgresql":
            new_id = self._execute("insert_run", params, self._returned_id)
        else:
            new_id = self._execute("insert_run", params, lambda cur: cur.lastrowid)
        return evolve(run, id=int(new_id))

    def insert_params(self, run: Run) -> dict[str, Any]:
        """The INSERT's parameters for `run`: its columns, times in this dialect's form."""
        fields = run.__dict__
        if len(fields) == len(COLUMNS):  # a Run's fields are the columns: one C-level copy
            params = fields.copy()
            del params["id"]
        else:
            params = {name: fields[name] for name in _INSERT_COLUMNS}
        dialect = self.dialect
        for name in _TIME_COLUMNS:
            params[name] = to_db(params[name], dialect)
        return params

    def decide(self, params: dict[str, Any]) -> tuple[Any, ...]:
        """PostgreSQL: run decide_run (see backends/postgres/merged.py); its one row.

        Sent through libpq directly (backends/postgres/wire.py) on a write connection already
        open. When the statement failed (its one transaction rolled back) or the connection did,
        the cursor path runs it again with its remedies (create the table, reconnect once, say
        what was denied), as it would have after its own first try."""
        if self._conn is not None and self.dialect == "postgresql":
            import psycopg

            from lockconsole.backends.postgres.wire import wire_for

            try:
                answer = wire_for(self._conn).exchange(
                    [(sqlfiles.load("decide_run", self.dialect), params)]
                )
            except psycopg.OperationalError:  # the connection failed: as the cursor path's own
                answer = None
            except psycopg.Error as exc:  # after the Sync: the row may be committed, never twice
                raise DatabaseError(self.describe(exc)) from None
            if answer is not None and answer.error is None:
                row = answer.first(0, self.url.masked, "decide_run")
                if not self._ports_seen:
                    self._ports_seen = True
                    prepare_if_direct(self._conn, row[-2], row[-1])
                return row
        return tuple(self._execute("decide_run", params, self._decided))

    def _decided(self, cur: Any) -> tuple[Any, ...]:
        row = cur.fetchone()
        if not self._ports_seen:
            self._ports_seen = True
            prepare_if_direct(cur.connection, row[-2], row[-1])
        return tuple(row)

    def _returned_id(self, cur: Any) -> int:
        """The new row's id; its ports let a direct connection prepare its statements."""
        new_id, server_port, client_port = cur.fetchone()[:3]
        if not self._ports_seen:
            self._ports_seen = True
            prepare_if_direct(cur.connection, server_port, client_port)
        return int(new_id)

    def finish(
        self,
        run: Run,
        outcome: str,
        *,
        exit_code: int | None = None,
        message: str | None = None,
        finished_at: datetime | None = None,
    ) -> Run:
        """Close an attempt that is still "acquired" by its own instance and process.

        Returns the updated Run; raises RunClosedError when the row was no longer open (another
        instance closed it as abandoned), which this write then leaves as it was.
        """
        params = self.finish_params(
            run, outcome, exit_code=exit_code, message=message, finished_at=finished_at
        )
        if self._execute("finish_run", params, lambda cur: cur.rowcount) != 1:
            raise RunClosedError(
                f"run {run.id} of {run.job} was already closed by another instance"
            )
        return finished(run, params)

    def finish_params(
        self,
        run: Run,
        outcome: str,
        *,
        exit_code: int | None = None,
        message: str | None = None,
        finished_at: datetime | None = None,
    ) -> dict[str, Any]:
        """finish_run's parameters (the message masked and cut; `finished_at` kept aware)."""
        if run.id is None:
            raise ValueError("this Run was never recorded (it has no id)")
        if outcome not in FINAL_OUTCOMES:
            raise ValueError(f"a run finishes as one of {FINAL_OUTCOMES}, not {outcome!r}")
        finished_at = finished_at or self.now()
        self._finished_at = (run.id, finished_at)  # what finish_params_again stamps this run
        return {
            "id": run.id,
            "outcome": outcome,
            "finished_at": to_db(finished_at, self.dialect),
            "exit_code": exit_code,
            "message": truncate(message),
            "instance": run.instance,
            "pid": run.pid,
            "finished": finished_at,
        }

    def finish_params_again(
        self, run: Run, outcome: str, *, exit_code: int | None = None, message: str | None = None
    ) -> dict[str, Any]:
        """finish_params for a run whose finish_params were made already (by a merged finish):
        stamped with the same `finished_at` (the one the statement stored, so the Run taken in
        says what the row says), without reading the clock again."""
        run_id, finished_at = self._finished_at
        return self.finish_params(
            run,
            outcome,
            exit_code=exit_code,
            message=message,
            finished_at=finished_at if run_id == run.id and run_id is not None else None,
        )

    def update(self, query: str, params: dict[str, Any]) -> int:
        """Run one UPDATE query file (its datetimes given aware); the number of rows changed."""
        return int(self._execute(query, self._values(params), lambda cur: cur.rowcount))

    def fetch_one(self, query: str, params: dict[str, Any]) -> Any:
        """The first row of one SELECT query file (its datetimes given aware), or None."""
        return self._execute(query, self._values(params), lambda cur: cur.fetchone())

    def fetch_all(self, query: str, params: dict[str, Any]) -> list[Any]:
        """Every row of one SELECT query file (its datetimes given aware)."""
        return list(self._execute(query, self._values(params), lambda cur: cur.fetchall()))

    def insert(self, query: str, params: dict[str, Any]) -> Any:
        """Run one INSERT query file (its datetimes given aware); the new row's id, if any."""
        return self._execute(query, self._values(params), _new_id)

    def _values(self, params: dict[str, Any]) -> dict[str, Any]:
        dialect = self.dialect
        return {k: to_db(v, dialect) if isinstance(v, datetime) else v for k, v in params.items()}

    def slot_claim(self, job: str, slot: datetime) -> Run | None:
        """The oldest attempt of `job` at `slot` that is running ("acquired") or "succeeded".

        The runner asks this while it holds the lock and refuses to run a slot that has one.
        Skipped, failed and lock_lost attempts do not claim a slot (a failed slot may be rerun).
        """
        params = {"job": job, "slot": to_db(slot, self.dialect)}
        row = self._execute("select_slot_claims", params, lambda cur: cur.fetchone())
        return None if row is None else _row_to_run(row)

    def abandoned(self, job: str, run: Run, limit: int = 10) -> list[Run]:
        """`job`'s attempts of other slots still "acquired" (not manual), oldest slot first."""
        params = {"job": job, "slot": run.slot, "limit": limit}
        found = map(_row_to_run, self.fetch_all("select_abandoned_runs", params))
        return [r for r in found if r.trigger != "manual"]

    # reads (SQLAlchemy Core)

    def runs(self, job: str | None = None, **read: Any) -> list[Run]:
        """Attempts, newest first, of one job or all (`since`, `limit`, `where`: reads.newest)."""
        return self._read(lambda have: reads.newest(have, job, dialect=self.dialect, **read))

    def slot_runs(self, job: str, slot: datetime) -> list[Run]:
        """Every attempt of `job` at `slot`, oldest first: who skipped, who ran, how it ended."""
        return self._read(lambda have: reads.of_slot(have, job, slot, self.dialect))

    def create_schema(self) -> None:
        """Create the ledger table and its indexes, or add the columns an older one lacks."""
        from sqlalchemy.exc import SQLAlchemyError

        try:
            ensure(self.sa_engine())
        except SQLAlchemyError as exc:
            raise DatabaseError(self.describe(getattr(exc, "orig", None) or exc)) from None
        finally:  # the pool would keep this connection open for the process's life
            if self._engine is not None and self.dialect != "sqlite":
                self._engine.dispose()
        self.schema_checked = True

    def sa_engine(self) -> Any:
        if self._engine is None:
            from lockconsole.backends.sa import engine_for

            self._engine = engine_for(
                self.url,
                pool_pre_ping=True,
                timeouts=self.timeouts,
                application_name=self.application_name,
            )
            if self.dialect == "postgresql":  # the reads' sessions carry our application_name
                from sqlalchemy import event

                event.listen(self._engine, "do_connect", self._name_connection)
        return self._engine

    def _name_connection(self, dialect: Any, record: Any, args: Any, params: Any) -> None:
        params.setdefault("application_name", self.application_name)

    def _read(self, build: Any) -> list[Run]:
        return [Run(**row) for row in self.rows(build)]

    def rows(self, build: Any) -> list[dict[str, Any]]:
        """Rows of the query `build(columns present)`; read-only: of the table as it is."""
        from sqlalchemy.exc import SQLAlchemyError

        try:
            if not self.schema_checked and self.read_only:  # read what exists, create nothing
                self.present, self.schema_checked = reads.present_columns(self.sa_engine()), True
            elif not self.schema_checked:
                self.create_schema()
            if self.read_only and self.present is None:
                return []  # no ledger table yet: nothing ran here (see `present`)
            with self.sa_engine().connect() as conn:
                rows = conn.execute(build(self.present)).mappings().all()
        except SQLAlchemyError as exc:
            raise DatabaseError(self.describe(getattr(exc, "orig", None) or exc)) from None
        return [dict(row) for row in rows]

    def _execute(self, name: str, params: dict[str, Any], handle: Any) -> Any:
        """Run one query file on the raw connection; create the table / reconnect once."""
        sql = sqlfiles.load(name, self.dialect)
        created = reconnected = False
        create_error: DatabaseError | None = None
        while True:
            conn = self.connection
            try:
                cur = conn.cursor()
                try:
                    cur.execute(sql, params)
                    return handle(cur)
                finally:
                    cur.close()
            except Exception as exc:
                kind = classify(exc, conn)
                if kind is None:
                    raise
                if kind == "missing" and not created:
                    created = True
                    try:
                        self.create_schema()
                    except DatabaseError as err:  # another instance may have won the race
                        create_error = err
                    continue
                if kind == "gone" and not reconnected:
                    reconnected = True
                    self.drop_connection()
                    continue
                if kind == "missing" and create_error is not None:
                    raise create_error from None
                if kind == "denied":
                    raise LedgerDenied(self.describe(exc) + _grant_hint(name, TABLE)) from None
                raise DatabaseError(self.describe(exc)) from None

    def trouble(self, exc: BaseException) -> str | None:
        """What kind of driver error `exc` is (errors.classify), with the write connection."""
        return classify(exc, self._conn)

    def drop_connection(self) -> None:
        conn, self._conn = self._conn, None
        self._borrowed = False  # a borrowed connection that broke is closed like our own
        if conn is not None:
            try:
                conn.close()
            except Exception:  # it is already broken
                pass

    def describe(self, exc: BaseException) -> str:
        return f"run ledger on {self.url.masked}: {scrub(first_line(exc), self.url)}"


def finished(run: Run, params: dict[str, Any], outcome: str | None = None) -> Run:
    """`run` closed as finish_params described it (as `outcome`, when the statement chose)."""
    # evolve() without its checks: these are Run's own fields (every finish comes here)
    return construct(
        type(run),
        {
            **run.__dict__,
            "outcome": outcome or params["outcome"],
            "finished_at": params["finished"],
            "exit_code": params["exit_code"],
            "message": params["message"],
        },
    )
