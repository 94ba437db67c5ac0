"""Prune one ledger database: attempts that started before the cutoff (server now - retention),
their output tails, run requests that finished before it, and the holder journal's holdings
that were gone by then.

The cutoff is the ledger server's clock, never this host's. Attempts go in batches of about
`batch_size` (fewer while the server is slow: see WRITE_TARGET), walked by a keyset on the
`started_at` index: each batch is read (its slots' attempts by the (job, slot) index, judged
whole by `summary.judge`), then written in one short transaction of its own: the summaries of
the slots that were not plain ok, the output tails, the attempts, each deleted by primary key
(on PostgreSQL in one statement, so the transaction lasts one round trip, and its commit does
not wait for the WAL flush). Nothing else is locked, so a `run` writing new attempts meanwhile
never waits on a prune for longer than one batch's transaction. Requests go
in batches of one statement each. One prune at a time per ledger database (a session advisory
lock on PostgreSQL, a named lock on MySQL); a second is told, and does nothing. Raw driver:
SQLAlchemy only to create a missing summary table.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from lockconsole.backends import sqlfiles
from lockconsole.backends.connect import first_line
from lockconsole.backends.ledger import clock
from lockconsole.backends.ledger.retention.summary import SlotSummary, judge, to_run
from lockconsole.backends.ledger.store import Ledger
from lockconsole.backends.ledger.timestamps import from_db, to_db
from lockconsole.config.urls import scrub
from lockconsole.model.errors import DatabaseError
from lockconsole.model.jobs import Database, Run
from lockconsole.model.keys import name_to_int64

BATCH = 1_000  # attempts per batch (a batch grows by the rest of its last slots' attempts)
# A batch whose write took longer than WRITE_TARGET halves the next batch, down to MIN_BATCH
# (never below the size asked for); one that took less than a quarter of it doubles the next,
# up to the size asked for. A busy server thus gets shorter transactions, an idle one the rate.
WRITE_TARGET = 0.025  # seconds
MIN_BATCH = 100
LOCK_NAME = "lockconsole_prune"
_EPOCH = datetime.fromisoformat("1970-01-01T00:00:00+00:00")


@dataclass
class PruneReport:
    """What one prune of one ledger did (or, dry, would do)."""

    ledger: str
    cutoff: datetime | None = None
    dry_run: bool = False
    runs: int = 0
    outputs: int = 0
    requests: int = 0
    journal: int = 0  # holdings of the holder journal gone before the cutoff
    summaries: int = 0
    kept: int = 0  # old attempts kept: their slot has an attempt after the cutoff
    batches: int = 0
    elapsed: float = 0.0  # seconds, the whole prune
    longest_batch: float = 0.0  # seconds: one batch, its reads and its transaction
    longest_lock: float = 0.0  # seconds: one batch's write transaction, BEGIN to COMMIT (on
    # PostgreSQL its one statement, start to end, as the server's clock measures it)
    largest_batch: int = 0  # attempts one batch deleted (or, dry, would delete)
    batch_seconds: list[float] = field(default_factory=list)
    lock_seconds: list[float] = field(default_factory=list)  # each batch's write transaction
    busy: bool = False  # another prune of this database was running: nothing was done
    stopped: bool = False  # asked to stop between batches

    def line(self) -> str:
        """One line of what was (or would be) removed: the audit row's message."""
        if self.busy:
            return "another prune of this ledger is running; nothing done"
        verb = "would delete" if self.dry_run else "deleted"
        return (
            f"{verb} {self.runs} attempts, {self.outputs} output tails, {self.requests} "
            f"requests, {self.journal} journal holdings; {self.summaries} slot summaries; "
            f"{self.kept} old attempts kept with "
            f"their slot; {self.batches} batches in {self.elapsed:.2f} s, longest "
            f"{self.longest_batch * 1000:.0f} ms" + (" (stopped)" if self.stopped else "")
        )


class _Pruner:
    """One prune over one ledger's raw autocommit connection."""

    def __init__(self, ledger: Ledger, report: PruneReport, batch_size: int) -> None:
        self.ledger = ledger
        self.dialect = ledger.dialect
        self.report = report
        self.batch_size = batch_size
        self.size = batch_size  # the next batch's size: see WRITE_TARGET

    def sql(self, name: str, params: dict[str, Any], handle: Callable[[Any], Any]) -> Any:
        cur = self.ledger.connection.cursor()
        try:
            cur.execute(sqlfiles.load(name, self.dialect), params)
            return handle(cur)
        finally:
            cur.close()

    def many(self, name: str, rows: list[dict[str, Any]]) -> None:
        if rows:
            cur = self.ledger.connection.cursor()
            try:
                cur.executemany(sqlfiles.load(name, self.dialect), rows)
            finally:
                cur.close()

    def listed(self, values: list[int]) -> Any:
        """A list of ids as the dialect's statement takes it (see the query files)."""
        if self.dialect == "postgresql":  # an array literal: dumped as one string, cast in SQL
            return "{" + ",".join(str(int(v)) for v in values) + "}"
        if self.dialect == "mysql":
            return tuple(values)
        return json.dumps(values)

    def db(self, moment: datetime | None) -> Any:
        return to_db(moment, self.dialect)

    def take_lock(self) -> bool:
        if self.dialect == "sqlite":  # one writer at a time anyway
            return True
        self.sql("set_prune_timeouts", {}, lambda cur: None)
        params = {"key": name_to_int64(LOCK_NAME), "name": LOCK_NAME}
        return bool(self.sql("try_prune_lock", params, lambda cur: cur.fetchone()[0]))

    def aware(self) -> Callable[[Any], Any]:
        """A stored time as an aware UTC datetime, the cheapest way for this dialect."""
        if self.dialect == "postgresql":
            return lambda value: value  # timestamptz: aware already
        if self.dialect == "mysql":
            return lambda value: None if value is None else value.replace(tzinfo=UTC)
        return from_db

    def runs(self, cutoff: datetime, now: datetime, stop: Callable[[], bool]) -> None:
        """Every batch of old attempts, until none is left (or `stop()` says so).

        One statement reads a batch and every attempt of its slots; the batch is the first
        `size` (see `adapt`) of those after the keyset and before the cutoff (a slot's other
        attempts may come before or after it), in the order the statement's own batch takes.
        """
        after: Any = self.db(_EPOCH)
        after_id = 0
        aware = self.aware()
        while not stop():
            began = time.perf_counter()
            params = {
                "cutoff": self.db(cutoff),
                "after": after,
                "after_id": after_id,
                "limit": self.size,
            }
            rows = list(self.sql("select_prune_batch", params, lambda cur: cur.fetchall()))
            rows.sort(key=lambda row: (row[5], row[0]))
            edge = (after, after_id)
            batch = [r for r in rows if (r[5], r[0]) > edge and r[5] < params["cutoff"]]
            batch = batch[: params["limit"]]
            if not batch:
                return
            after, after_id = batch[-1][5], int(batch[-1][0])
            attempts: dict[tuple[str, Any], list[Run]] = {}
            for id_, job, slot, instance, outcome, started, finished in rows:
                run = to_run(
                    {
                        "id": id_,
                        "job": job,
                        "slot": aware(slot),
                        "instance": instance,
                        "outcome": outcome,
                        "started_at": aware(started),
                        "finished_at": aware(finished),
                    }
                )
                attempts.setdefault((job, slot), []).append(run)
            ids = {int(r[0]) for r in batch}
            verdicts = judge(((r[1], r[2]) for r in batch), attempts, ids, cutoff, now)
            self.report.kept += verdicts.kept
            if verdicts.ids:
                self.write(verdicts.ids, verdicts.summaries)
            took = time.perf_counter() - began
            self.report.batches += 1
            self.report.batch_seconds.append(took)
            self.report.longest_batch = max(self.report.longest_batch, took)
            if len(batch) < params["limit"]:
                return
        self.report.stopped = True

    def adapt(self, held: float) -> None:
        """The next batch's size, from how long this batch's write transaction took."""
        if held > WRITE_TARGET:
            self.size = max(min(self.batch_size, MIN_BATCH), self.size // 2)
        elif held < WRITE_TARGET / 4:
            self.size = min(self.batch_size, self.size * 2)

    def write(self, ids: list[int], summaries: list[SlotSummary]) -> None:
        """One batch's transaction: keep the summaries, delete the tails and the attempts."""
        listed = {"ids": self.listed(ids)}
        if self.report.dry_run:
            self.report.outputs += int(
                self.sql("count_pruned_outputs", listed, lambda cur: cur.fetchone()[0])
            )
            self.report.runs += len(ids)
            self.report.summaries += len(summaries)
            self.report.largest_batch = max(self.report.largest_batch, len(ids))
            return
        began = time.perf_counter()
        held: float | None = None
        if self.dialect == "postgresql":  # one statement: its own transaction, one round trip
            params = {**listed, "summaries": json.dumps([_as_json(s) for s in summaries])}
            outputs, deleted, on_server = self.sql(
                "write_pruned_batch", params, lambda cur: cur.fetchone()
            )
            held = float(on_server)  # the round trip's rest (network, this client) locks nothing
        else:
            rows = [{**vars(s), **{k: self.db(getattr(s, k)) for k in _TIMES}} for s in summaries]
            self.sql("begin_transaction", {}, lambda cur: None)  # sqlite3 has no begin()
            try:
                self.many("insert_slot_summary", rows)
                outputs = self.sql("delete_pruned_outputs", listed, lambda cur: cur.rowcount)
                deleted = self.sql("delete_pruned_runs", listed, lambda cur: cur.rowcount)
                self.ledger.connection.commit()  # PyMySQL's and sqlite3's own COMMIT
            except BaseException:
                self.rollback()
                raise
        if held is None:
            held = time.perf_counter() - began
        self.adapt(held)
        self.report.lock_seconds.append(held)
        self.report.longest_lock = max(self.report.longest_lock, held)
        self.report.outputs += int(outputs)
        self.report.runs += int(deleted)
        self.report.summaries += len(summaries)
        self.report.largest_batch = max(self.report.largest_batch, int(deleted))

    def rollback(self) -> None:
        try:
            self.ledger.connection.rollback()
        except Exception:  # the connection broke: the server rolled it back
            pass

    def requests(self, cutoff: datetime, stop: Callable[[], bool]) -> None:
        """Finished requests last changed before the cutoff, one short statement per batch."""
        self.report.requests = self._batches("pruned_requests", cutoff, stop)

    def journal(self, cutoff: datetime, stop: Callable[[], bool]) -> None:
        """The holder journal's holdings gone before the cutoff, one statement per batch."""
        self.report.journal = self._batches("pruned_journal", cutoff, stop)

    def _batches(self, what: str, cutoff: datetime, stop: Callable[[], bool]) -> int:
        """Delete `what` (count_/delete_ `what` .sql) in batches; dry: count it. How many."""
        params = {"cutoff": self.db(cutoff), "limit": self.batch_size}
        if self.report.dry_run:
            return int(self.sql(f"count_{what}", params, lambda cur: cur.fetchone()[0]))
        total = 0
        while not stop():
            began = time.perf_counter()
            deleted = int(self.sql(f"delete_{what}", params, lambda cur: cur.rowcount))
            took = time.perf_counter() - began
            total += deleted
            self.report.batches += 1
            self.report.batch_seconds.append(took)
            self.report.longest_batch = max(self.report.longest_batch, took)
            self.report.longest_lock = max(self.report.longest_lock, took)
            if deleted < self.batch_size:
                break
        return total


_TIMES = ("slot", "first_started_at", "last_finished_at", "pruned_at")


def _as_json(summary: SlotSummary) -> dict[str, Any]:
    """A summary as a row of the JSON array PostgreSQL's batch statement reads (ISO times)."""
    row = dict(vars(summary))
    for name in _TIMES:
        moment = row[name]
        row[name] = None if moment is None else moment.isoformat()
    return row


def prune(
    database: Database,
    older_than: timedelta,
    *,
    dry_run: bool = False,
    batch_size: int = BATCH,
    stop: Callable[[], bool] = lambda: False,
) -> PruneReport:
    """Prune `database`'s ledger of what is older than `older_than` before the server's now.

    `dry_run`: count what would go and change nothing (no table is created either). `stop`
    is asked between batches. Raises DatabaseError (the URL masked) when the server fails.
    """
    report = PruneReport(database.name, dry_run=dry_run)
    began = time.perf_counter()
    ledger = Ledger(database, application_name="lockconsole-prune")
    pruner = _Pruner(ledger, report, batch_size)
    try:
        if not dry_run:
            ledger.create_schema()  # the summary table, on a ledger from before it
        if not pruner.take_lock():
            report.busy = True
            return report
        now = clock.read(ledger).server  # a fresh reading: the cutoff is the server's
        report.cutoff = cutoff = now - older_than
        steps = (
            lambda: pruner.runs(cutoff, now, stop),
            lambda: pruner.requests(cutoff, stop),
            lambda: pruner.journal(cutoff, stop),
        )
        for step in steps:
            try:
                step()
            except Exception as exc:
                if not (dry_run and ledger.trouble(exc) == "missing"):
                    raise  # dry: a table that is not there has nothing to prune
    except DatabaseError:
        raise
    except Exception as exc:
        if ledger.trouble(exc) is None:
            raise
        said = scrub(first_line(exc), database.url)
        raise DatabaseError(f"prune of the ledger on {database.url.masked}: {said}") from None
    finally:
        ledger.close()  # the prune lock goes with the session
        report.elapsed = time.perf_counter() - began
    return report
