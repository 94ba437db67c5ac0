"""Counters the exporter keeps in memory: attempts by outcome, slots by the status they reach.

A gauge of the lookback window cannot tell an alert rule that something happened just now, nor
stop telling it a day later; a counter can (`increase(...[1h]) > 0`). Each scrape advances
the counters from the snapshot's rows it has not counted yet:

- an attempt counts once, by its outcome, when that outcome is final (not `acquired`);
- a slot counts once for each final status it reaches: not `running`, and not before its
  `[console] grace` has passed (the other instances try a slot within it, so a failure they
  retry counts as `retried`, never as `failed` first), except `double_run`, which counts at
  once (nothing undoes it); a slot that was `ok` and became `double_run` when a second success
  landed counts under both.

They start at 0 with the process: at the first read of a job, the rows already there are taken
as counted (Prometheus reads a restart as a counter reset, and a reset from a count back to 0
adds nothing, where a restart that recounted the lookback would look like new events). A new
label set (an instance seen for the first time) is exported at 0 for one scrape before its
first count, so that `increase()` sees it rise.

A job whose ledger or lock database this scrape could not read does not advance, and its
counter series are left out of the scrape rather than kept at their last value: a value kept
would claim that nothing happened, while a gap says "unknown", and `increase()` over a range
still counts what happened during the outage once the rows are read again (the rows are
counted at that next read, so the counters continue monotonic). Counted rows are forgotten
once they are older than the lookback (and rows older than it are never counted: a job's
newest attempt is in every snapshot, however old), so the memory stays bounded; a snapshot
reads at most `[console] history_limit` attempts per ledger, so a fleet that records more than
that between two scrapes is undercounted.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable
from datetime import datetime
from typing import Any, get_args

from lockconsole.config.loader import Config
from lockconsole.metrics.figures import Figure, slot_statuses
from lockconsole.model.jobs import Outcome, Run
from lockconsole.model.views import SlotReport, Snapshot

OUTCOMES: tuple[str, ...] = get_args(Outcome)
RunKey = tuple[object, ...]


def _run_key(run: Run) -> RunKey:
    return (run.id,) if run.id is not None else (run.instance, run.started_at)


def _jsonable(part: object) -> object:
    return {"at": part.isoformat()} if isinstance(part, datetime) else part


def _run_key_of(key: list[Any]) -> RunKey:
    """A run key from its JSON form (see _jsonable)."""
    return tuple(datetime.fromisoformat(p["at"]) if isinstance(p, dict) else p for p in key)


class Counters:
    """The exporter's counters, advanced by `advance(snapshot)` once per scrape."""

    def __init__(self, config: Config) -> None:
        self.config = config
        self.attempts: Counter[tuple[str, str, str]] = Counter()  # job, outcome, instance
        self.slots: Counter[tuple[str, str]] = Counter()  # job, status
        self._pending: Counter[tuple[str, str, str]] = Counter()  # counted at the next scrape
        self._runs: dict[str, dict[RunKey, datetime]] = {}  # job -> counted run -> its start
        self._slots: dict[str, dict[datetime, set[str]]] = {}  # job -> slot -> statuses counted

    def advance(self, snap: Snapshot, known: Iterable[str]) -> None:
        """Count the final attempts and slot statuses of the known jobs not counted yet."""
        self.attempts.update(self._pending)
        self._pending.clear()
        since = snap.taken_at - self.config.console.lookback
        runs_of: dict[str, list[Run]] = defaultdict(list)
        for run in snap.runs:
            runs_of[run.job].append(run)
        slots_of: dict[str, list[SlotReport]] = defaultdict(list)
        for report in snap.slots:
            slots_of[report.job].append(report)
        for job in sorted(known):
            first = job not in self._runs
            self._count_runs(job, [r for r in runs_of[job] if r.started_at >= since], first)
            fresh = [r for r in slots_of[job] if r.slot >= since]
            self._count_slots(job, fresh, snap.taken_at, first)
            runs, slots = self._runs[job], self._slots[job]
            for counted in [k for k, started in runs.items() if started < since]:
                del runs[counted]
            for slot in [s for s in slots if s < since]:
                del slots[slot]

    def _count_runs(self, job: str, found: list[Run], first: bool) -> None:
        runs = self._runs.setdefault(job, {})
        for run in found:
            if run.outcome == "acquired" or _run_key(run) in runs:
                continue
            runs[_run_key(run)] = run.started_at
            key = (job, run.outcome, run.instance)
            if key not in self.attempts:
                for outcome in OUTCOMES:  # the instance's series all start at 0
                    self.attempts[job, outcome, run.instance] += 0
                if not first:
                    self._pending[key] += 1
                    continue
            if not first:
                self.attempts[key] += 1

    def _count_slots(self, job: str, found: list[SlotReport], now: datetime, first: bool) -> None:
        slots = self._slots.setdefault(job, {})
        for status in slot_statuses():
            self.slots[job, status] += 0  # every status exported, 0 included
        for report in found:
            if not self._final(report, now):
                continue
            reached = slots.setdefault(report.slot, set())
            if report.status not in reached:
                reached.add(report.status)
                if not first:
                    self.slots[job, report.status] += 1

    def state(self) -> dict[str, Any]:
        """Everything needed to go on from here in another process, as JSON values."""
        return {
            "attempts": [[*k, n] for k, n in sorted(self.attempts.items())],
            "pending": [[*k, n] for k, n in sorted(self._pending.items())],
            "slots": [[*k, n] for k, n in sorted(self.slots.items())],
            "runs": {
                job: [[list(map(_jsonable, key)), at.isoformat()] for key, at in runs.items()]
                for job, runs in self._runs.items()
            },
            "slots_seen": {
                job: [[slot.isoformat(), sorted(reached)] for slot, reached in seen.items()]
                for job, seen in self._slots.items()
            },
        }

    def restore(self, state: dict[str, Any]) -> None:
        """Go on from `state()` of an earlier process (raises on anything malformed)."""
        self.attempts = Counter(
            {(str(j), str(o), str(i)): int(n) for j, o, i, n in state["attempts"]}
        )
        self._pending = Counter(
            {(str(j), str(o), str(i)): int(n) for j, o, i, n in state["pending"]}
        )
        self.slots = Counter({(str(j), str(st)): int(n) for j, st, n in state["slots"]})
        self._runs = {
            str(job): {_run_key_of(key): datetime.fromisoformat(at) for key, at in runs}
            for job, runs in state["runs"].items()
        }
        self._slots = {
            str(job): {
                datetime.fromisoformat(slot): set(map(str, reached)) for slot, reached in seen
            }
            for job, seen in state["slots_seen"].items()
        }

    def _final(self, report: SlotReport, now: datetime) -> bool:
        """Whether the slot's status counts now (see the module's docstring)."""
        if report.status == "running":
            return False
        return report.status == "double_run" or report.slot + self.config.console.grace <= now

    def figures(self, known: Iterable[str]) -> list[Figure]:
        """The counters of the known jobs (an unknown job's are left out: see the docstring)."""
        shown = set(known)
        attempts = Figure(
            "attempts",
            "Attempts counted by this exporter since it started, by final outcome and instance",
            ("job_name", "outcome", "instance_name"),
            kind="counter",
        )
        for (job, outcome, instance), count in sorted(self.attempts.items()):
            if job in shown:
                attempts.add((job, outcome, instance), count)
        slots = Figure(
            "slots",
            "Slots counted by this exporter since it started, once for each final status reached",
            ("job_name", "status"),
            kind="counter",
        )
        for (job, status), count in sorted(self.slots.items()):
            if job in shown:
                slots.add((job, status), count)
        return [attempts, slots]
