"""The sampler's side of the holder journal: each sample of the holders, compared with this
process's previous one, becomes the journal's transitions (appeared, gone), written to the
journal of each database's ledger.

A database that could not be read is unknown: its holders neither appear nor go. A write that
fails leaves this sampler's memory of that database as it was, so the next sample writes the
same transitions again (the upsert and the close of an open row make that harmless). It runs
in the snapshot's thread, never the UI's, and writes only when something changed.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterable
from datetime import datetime
from typing import Any

from lockconsole.backends.ledger import journal as store
from lockconsole.config.loader import Config
from lockconsole.model.views import Holder

log = logging.getLogger(__name__)

Identity = tuple[object, ...]


def journal_home(config: Config, database: str) -> str | None:
    """The ledger database whose journal keeps `database`'s holders: the configured ledger
    database, else the database itself when it is SQL (Redis keeps no tables)."""
    if config.ledger_database:
        return config.ledger_database
    db = config.databases.get(database)
    if db is None or db.url.dialect == "redis":
        return None
    return database


class HolderJournal:
    """What this process last saw of each database's granted holders, and the journal's
    first sighting of each holding it sees now (for how long a lock has been held)."""

    def __init__(self, config: Config, engine_of: Callable[[str], Any]) -> None:
        self.config = config
        self._engine_of = engine_of  # a journal database's name -> its SQLAlchemy engine
        self._seen: dict[str, dict[Identity, Holder]] = {}
        self._sampled: dict[str, datetime] = {}  # each database's previous sample
        self._first: dict[Identity, datetime] = {}  # the journal's first_seen of what is held
        self._ready: set[str] = set()  # journal databases whose table exists
        self._lock = threading.Lock()
        self.writes = 0  # statements' transactions written (one per journal database and sample)
        self.problems: dict[str, str] = {}  # journal database -> why its last write failed

    def first_seen(self, identity: Identity) -> datetime | None:
        """The journal's first sighting of a holding held now, by any sampler; None: unknown."""
        return self._first.get(identity)

    def observe(self, holders: Iterable[Holder], now: datetime, unread: Iterable[str]) -> None:
        """Turn one sample (the ledger server's `now`) of the holders of every configured
        database but the `unread` ones into the journal's transitions."""
        skip = set(unread)
        current: dict[str, dict[Identity, Holder]] = {}
        for h in holders:
            if h.granted and h.database not in skip:
                current.setdefault(h.database, {})[store.identity(h)] = h
        with self._lock:
            homes: dict[str, list[tuple[str, store.Appeared, store.Gone]]] = {}
            for database in sorted((set(self.config.databases) | set(current)) - skip):
                home = journal_home(self.config, database)
                if home is None:
                    continue
                now_held = current.get(database, {})
                before = self._seen.get(database, {})
                prev = self._sampled.get(database)
                new = [h for k, h in now_held.items() if k not in before]
                left = [store.holding_of(h) for k, h in before.items() if k not in now_held]
                batch = (
                    database,
                    store.Appeared(new, prev, now),
                    store.Gone(left, prev or now, now),
                )
                homes.setdefault(home, []).append(batch)
            for home, batches in homes.items():
                changed = any(
                    a.holders or g.holdings or a.seen_after is None for _, a, g in batches
                )
                if changed and not self._write(home, batches):
                    continue  # the next sample tries these transitions again
                for database, _, _ in batches:
                    now_held = current.get(database, {})
                    for key in self._seen.get(database, {}).keys() - now_held.keys():
                        self._first.pop(key, None)
                    self._seen[database] = now_held
                    self._sampled[database] = now

    def _write(self, home: str, batches: list[tuple[str, store.Appeared, store.Gone]]) -> bool:
        try:
            engine = self._engine_of(home)
            if home not in self._ready:
                store.ensure_journal(engine)
                self._ready.add(home)
            gone = [g for _, _, g in batches]
            for database, appeared, _ in batches:
                if appeared.seen_after is None:  # this sampler's first look at the database:
                    # rows left open by samplers that stopped, of holdings not held now, close
                    held = {store.holding_of(h) for h in appeared.holders}
                    stale = store.open_holdings(engine, database) - held
                    gone.append(store.Gone(sorted(stale), None, appeared.first_seen))
            first = store.record(engine, [a for _, a, _ in batches], gone)
        except Exception as exc:  # the journal is bookkeeping: a snapshot never fails on it
            self.problems[home] = " ".join(str(exc).split())[:300]
            log.warning("holder journal of %s not written: %s", home, self.problems[home])
            return False
        self.problems.pop(home, None)
        self.writes += 1
        by_holding = {}
        for _, appeared, _ in batches:
            for h in appeared.holders:
                by_holding[store.holding_of(h)] = store.identity(h)
        for holding, seen in first.items():
            if holding in by_holding:
                self._first[by_holding[holding]] = seen
        return True


class JournalSampler:
    """`schedule`'s sampler: every `every`, the holders of every configured database, read as
    the console reads them, become the journal's transitions. A thread of its own; stop() ends
    it between two samples."""

    def __init__(self, config: Config, every: float) -> None:
        from concurrent.futures import ThreadPoolExecutor

        from lockconsole.console.connections import Connections

        self.config, self.every = config, every
        self._pool = ThreadPoolExecutor(max_workers=4, thread_name_prefix="lockconsole-journal")
        self.connections = Connections(
            config, self._pool, ledger_application_name="lockconsole:journal", read_only=True
        )
        self.journal = HolderJournal(config, lambda name: self.connections.ledger(name).sa_engine())
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        homes = {journal_home(config, name) for name in config.databases}
        self._homes = sorted(home for home in homes if home is not None)

    def sample(self) -> None:
        """One sample: the holders, the journal databases' time, the transitions."""
        from lockconsole.model.slots import utcnow

        now = self.connections.known_server_now(self._homes)
        reads = self.connections.read(self.connections.targets(), [], now or utcnow())
        if now is None:
            now = self.connections.server_now(self._homes, reads.errors)
        if now is None:  # no journal database answers: nothing can be written now
            return
        holders = [h for listed, _ in reads.holders.values() for h in listed.holders]
        self.journal.observe(holders, now, reads.errors)

    def start(self) -> JournalSampler:
        from lockconsole.backends.sa import import_first
        from lockconsole.backends.threads import start_quiet

        # SQLAlchemy, the journal's dialects and the lease inspector are imported here, in the
        # caller's thread, before this thread and the scheduler's could import them at once
        dbs = self.config.databases
        leases = {
            dbs[j.database].url.dialect for j in self.config.jobs.values() if j.strategy == "lease"
        }
        modules = ("lockconsole.backends.lease.inspect",) if leases else ()
        import_first(sorted({dbs[h].url.dialect for h in self._homes} | leases), *modules)
        self._thread = threading.Thread(target=self._run, daemon=True, name="lockconsole-journal")
        start_quiet(self._thread)
        return self

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.sample()
            except Exception as exc:  # a sampler never takes its process down
                log.warning("holder journal sample failed: %s", " ".join(str(exc).split()))
            self._stop.wait(self.every)

    def stop(self, wait: float = 2.0) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(wait)
        self.connections.close()
        self._pool.shutdown(wait=False, cancel_futures=True)
