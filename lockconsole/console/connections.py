"""The Console's connections and the reads it makes over them.

One Connections object keeps every connection the console opens (an inspector per database or
lease table, a Ledger per ledger database, a pooled SQLAlchemy engine per database for the
duplicate inspector, what was learnt about a pooler) and reads through them under the rules of
`waits`: a time budget per snapshot, at most one outstanding call per database, the databases
that were down in the last snapshot waited for only briefly, and each one's last real error.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Hashable
from concurrent.futures import Executor
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, TypeVar

from lockconsole.backends.connect import Timeouts
from lockconsole.backends.factory import open_inspector
from lockconsole.backends.inspect import HolderList, Inspector
from lockconsole.config.loader import Config
from lockconsole.config.urls import scrub
from lockconsole.console.waits import Call, Calls, budget_of, pending_text, timeouts_of, wait_for
from lockconsole.model.errors import DatabaseError
from lockconsole.model.jobs import Database, Run
from lockconsole.model.views import Alert, RunFilter

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

    from lockconsole.backends.ledger.store import Ledger
    from lockconsole.backends.postgres.pooler import PoolerInfo
    from lockconsole.console.snapshot.ledger_view import LedgerView

log = logging.getLogger(__name__)
T = TypeVar("T")
Target = tuple[str, str | None]  # (database, lease table or None): where holders are seen
Holders = tuple[HolderList, set[int] | None]  # a target's holders, and its orphaned pooled pids


@dataclass
class Reads:
    """What one round of reads brought back: per target, per ledger, and per database down."""

    holders: dict[Target, Holders] = field(default_factory=dict)
    ledgers: dict[str, LedgerView] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)  # database -> why it has no answer
    seconds: dict[str, float] = field(default_factory=dict)  # database -> its longest read

    def took(self, db_name: str, call: Call[Any]) -> None:
        """Note how long one of the database's reads took (a call still running: not yet)."""
        took = call.took()
        if took is not None:
            self.seconds[db_name] = max(took, self.seconds.get(db_name, 0.0))


class Connections:
    """The console's kept connections, and its reads of holders and runs within a budget."""

    def __init__(
        self,
        config: Config,
        pool: Executor,
        *,
        ledger_application_name: str,
        read_only: bool = False,
    ) -> None:
        self.config = config
        self.read_only = read_only  # ledgers read what exists and create no table
        self.ledger_application_name = ledger_application_name  # names its ledger sessions
        self.settings = config.console
        self.timeouts: Timeouts = timeouts_of(self.settings)  # on every connection opened
        self.budget: float = budget_of(self.settings)  # seconds a snapshot waits for a database
        self.calls = Calls(pool)  # at most one outstanding read per database
        self._lock = threading.Lock()
        self._inspectors: dict[Target, Inspector] = {}
        self._ledgers: dict[str, Ledger] = {}  # one kept Ledger per ledger database
        self._engines: dict[str, Engine] = {}  # one pooled engine per database
        self._pooler: dict[str, PoolerInfo] = {}  # detected by a database's holders() worker
        self._down: set[str] = set()  # databases with an error in the last snapshot
        self._last_errors: dict[str, str] = {}  # database -> its last real error

    # --- one round of reads --------------------------------------------------------------

    def targets(self) -> list[Target]:
        """(database, lease table or None) for every place where holders can be seen."""
        targets: set[Target] = set()
        for db in self.config.databases.values():
            if db.url.dialect in ("postgresql", "mysql", "redis"):
                targets.add((db.name, None))
        for job in self.config.jobs.values():
            if job.strategy == "lease":
                targets.add((job.database, job.lease_table))
        return sorted(targets, key=lambda t: (t[0], t[1] or ""))

    def read(self, targets: list[Target], ledgers: list[str], now: datetime) -> Reads:
        """Holders of every target and recent runs of every ledger, in parallel, within the
        budget; a database without an answer (error, or still waiting) is in `errors`."""
        budget, down = self.budget, self._down
        self._import_sqlalchemy(targets, ledgers)
        holder_calls = {t: self.calls.start(("holders", *t), self.holders, *t) for t in targets}
        run_calls = {n: self.calls.start(("runs", n), self.recent_runs, n, now) for n in ledgers}
        wait_for(
            [
                *((c, t[0] in down) for t, c in holder_calls.items()),
                *((c, n in down) for n, c in run_calls.items()),
            ],
            budget,
        )
        reads = Reads()
        for target, holder_call in holder_calls.items():
            reads.took(target[0], holder_call)
            listed = self._answer(("holders", *target), holder_call, target[0], reads.errors)
            if listed is not None:
                reads.holders[target] = listed
        for name, run_call in run_calls.items():
            reads.took(name, run_call)
            view = self._answer(("runs", name), run_call, name, reads.errors)
            if view is not None:
                reads.ledgers[name] = view
        self._down = set(reads.errors)
        self._last_errors = {k: v for k, v in self._last_errors.items() if k in reads.errors}
        return reads

    def _import_sqlalchemy(self, targets: list[Target], ledgers: list[str]) -> None:
        """Leases and SQLite ledgers are read through SQLAlchemy: imported here, in the caller's
        thread, before the pool's threads read them side by side (see sa.import_first)."""
        dbs = self.config.databases
        leases = [dbs[t[0]].url.dialect for t in targets if t[1] is not None]
        sqlite = [n for n in ledgers if dbs[n].url.dialect == "sqlite"]
        if leases or sqlite:
            from lockconsole.backends.sa import import_first

            modules = ("lockconsole.backends.lease.inspect",) if leases else ()
            import_first([*leases, *(dbs[n].url.dialect for n in ledgers)], *modules)

    def _answer(
        self, key: tuple[Hashable, ...], call: Call[T], db_name: str, errors: dict[str, str]
    ) -> T | None:
        """The call's result; or None, with the database's error (or wait) put in `errors`."""
        budget = self.budget
        if not call.future.done():
            if not call.timed_out and call.elapsed() >= budget:
                call.timed_out = True
                self._give_up(key)
            text = pending_text(call, budget, self._last_errors.get(db_name))
            errors.setdefault(db_name, text)
            return None
        self.calls.used(key, call)
        exc = call.future.exception()
        if exc is None:
            return call.future.result()
        if call.timed_out:
            errors.setdefault(db_name, f"no answer within {budget:g} s")
        else:
            text = errors.setdefault(db_name, self.error_text(db_name, exc))
            self._last_errors[db_name] = text
        return None

    def _give_up(self, key: tuple[Hashable, ...]) -> None:
        """A read ran past its budget: end its statement if we can, reconnect next time."""
        with self._lock:
            if key[0] == "runs":
                self._ledgers.pop(str(key[1]), None)  # its thread closes it when it ends
                return
            db_name, table = key[1], key[2]
            assert isinstance(db_name, str) and (table is None or isinstance(table, str))
            inspector = self._inspectors.pop((db_name, table), None)
        abort = getattr(inspector, "abort", None)
        if abort is not None:
            abort()

    def error_text(self, db_name: str, exc: BaseException) -> str:
        """One line for a database's error, its password scrubbed."""
        db = self.config.databases.get(db_name)
        text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        if isinstance(exc, DatabaseError) or db is None:
            return text if db is None else scrub(text, db.url)
        return scrub(f"{type(exc).__name__}: {text}", db.url)

    # --- holders -------------------------------------------------------------------------

    def inspector(self, db_name: str, table: str | None) -> Inspector:
        """The kept inspector of a database (table None) or of a lease table."""
        with self._lock:
            found = self._inspectors.get((db_name, table))
            if found is not None:
                return found
        database = self.config.databases[db_name]
        inspector = open_inspector(database, table, self.timeouts)
        with self._lock:
            self._inspectors[(db_name, table)] = inspector
        return inspector

    def holders(self, db_name: str, table: str | None) -> Holders:
        """Holders, and (in the same worker thread) the database's orphaned pooled pids."""
        inspector = self.inspector(db_name, table)
        jobs = [j for j in self.config.jobs.values() if j.database == db_name]
        try:
            listed = inspector.holders(jobs)
        except Exception:
            with self._lock:  # drop it: the next snapshot reconnects
                if self._inspectors.get((db_name, table)) is inspector:
                    del self._inspectors[(db_name, table)]
            try:
                inspector.close()
            except Exception:
                pass
            raise
        return listed, (None if table else self._orphans_of(self.config.databases[db_name]))

    def _orphans_of(self, db: Database) -> set[int] | None:
        """Pids of `db`'s pooled server connections with no client; None if none or unknown."""
        info = self._pooler_info(db)
        if info is None or not info.detected:
            return None
        from lockconsole.backends.postgres.pooler import orphaned_server_pids

        try:
            return orphaned_server_pids(db.url)
        except Exception as exc:
            log.debug("orphaned server pids of %s: %s", db.name, exc)
            return None

    def _pooler_info(self, db: Database) -> PoolerInfo | None:
        if db.url.dialect != "postgresql":
            return None
        if db.name not in self._pooler:
            from lockconsole.backends.postgres.pooler import detect_pooler

            try:
                self._pooler[db.name] = detect_pooler(db.url)
            except Exception as exc:
                log.debug("pooler detection on %s failed: %s", db.name, exc)
                return None
        return self._pooler[db.name]

    def pooler_alerts(self) -> list[Alert]:
        """One alert per job a detected pooler endangers (pooler facts from holders())."""
        from lockconsole.backends.postgres.pooler import pooler_warnings

        out = []
        for db in self.config.databases.values():
            info = self._pooler.get(db.name)
            if info is None:
                continue
            jobs = [j for j in self.config.jobs.values() if j.database == db.name]
            for warning in pooler_warnings(jobs, db, info):
                out.append(Alert("pooler", None, warning, database=db.name))
        return out

    # --- runs ----------------------------------------------------------------------------

    def known_server_now(self, ledgers: list[str]) -> datetime | None:
        """The first ledger server's time now from a reading already taken (no statement is
        sent, so a hung server cannot stall it); None before any reading."""
        from lockconsole.backends.ledger import clock

        with self._lock:
            opened = [self._ledgers[name] for name in ledgers if name in self._ledgers]
        for ledger in opened:
            found = clock.known(ledger)
            if found is not None:
                return found.now()
        return None

    def server_now(self, ledgers: list[str], errors: dict[str, str]) -> datetime | None:
        """The first readable ledger server's time now (pauses, abandoned runs and missed slots
        are judged by it); None when no ledger could be read (the local clock then serves)."""
        for name in ledgers:
            if name not in errors:
                try:
                    return self.ledger(name).now()
                except Exception:  # unreadable now: the next ledger, or the local clock
                    continue
        return None

    def missing_notes(self, ledgers: list[str], errors: dict[str, str]) -> list[tuple[str, str]]:
        """Read-only: a note per ledger database that has no run ledger table (none is made)."""
        return [
            (name, "no run ledger table (lockconsole_runs): nothing ran here; read-only makes none")
            for name in ledgers
            if self.read_only and name not in errors and name in self._ledgers
            and self._ledgers[name].schema_checked and self._ledgers[name].present is None
        ]  # fmt: skip

    def ledger(self, name: str) -> Ledger:
        """The kept Ledger of ledger database `name` (its engine and connection stay open)."""
        from lockconsole.backends.ledger.store import Ledger

        with self._lock:
            ledger = self._ledgers.get(name)
            if ledger is None:
                ledger = self._ledgers[name] = Ledger(
                    self.config.databases[name],
                    application_name=self.ledger_application_name,
                    timeouts=self.timeouts,
                    read_only=self.read_only,
                )
            return ledger

    def read_runs(
        self,
        name: str,
        job: str | None = None,
        *,
        since: datetime | None = None,
        limit: int = 200,
        where: RunFilter | None = None,
    ) -> list[Run]:
        """Attempts from ledger database `name`, newest first; a failed ledger is reopened."""
        return self._through(
            name, lambda ledger: ledger.runs(job, since=since, limit=limit, where=where)
        )

    def _through(self, name: str, read: Callable[[Ledger], T]) -> T:
        """`read(ledger)` on ledger database `name`; a failed ledger is dropped (reopened on
        the next read), and one given up on while it ran is closed."""
        ledger = self.ledger(name)
        try:
            found = read(ledger)
        except Exception:
            with self._lock:  # drop it: the next read reconnects
                if self._ledgers.get(name) is ledger:
                    del self._ledgers[name]
            try:
                ledger.close()
            except Exception:
                pass
            raise
        with self._lock:
            orphaned = self._ledgers.get(name) is not ledger  # given up on while it ran
        if orphaned:
            ledger.close()
        return found

    def recent_runs(self, name: str, now: datetime) -> LedgerView:
        """What a snapshot reads of ledger `name`: its jobs' slots over [console] lookback, as
        the ledger aggregates them, and its newest attempts, at most history_limit."""
        from lockconsole.console.snapshot.ledger_view import read_view

        jobs = sorted(
            j.name for j in self.config.jobs.values() if self.config.ledger_for(j).name == name
        )
        since, limit = now - self.settings.lookback, self.settings.history_limit
        return self._through(name, lambda ledger: read_view(ledger, jobs, since=since, limit=limit))

    # --- SQL homes and engines -----------------------------------------------------------

    def sql_home(self, db: Database) -> Database:
        """Where `db`'s audit and idempotency tables live: Redis has none, the ledger's SQL has."""
        if db.url.dialect == "redis" and self.config.ledger_database:
            return self.config.databases[self.config.ledger_database]
        return db

    def engine(self, db: Database) -> Engine:
        """One pooled SQLAlchemy engine per database, for the duplicate inspector."""
        with self._lock:
            engine = self._engines.get(db.name)
            if engine is None:
                from lockconsole.backends.sa import engine_for

                engine = self._engines[db.name] = engine_for(
                    db.url, pool_pre_ping=True, timeouts=self.timeouts
                )
            return engine

    def close(self) -> None:
        """Close every kept inspector and ledger and dispose of every engine."""
        with self._lock:
            kept: list[Inspector | Ledger] = [*self._inspectors.values(), *self._ledgers.values()]
            self._inspectors.clear()
            self._ledgers.clear()
        for inspector_or_ledger in kept:
            try:
                inspector_or_ledger.close()
            except Exception:
                pass
        for engine in self._engines.values():
            engine.dispose()
