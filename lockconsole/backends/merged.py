"""An attempt in the fewest round trips: `decide` (try the lock, check the slot's claim, record)
and `finish` (check the lock, record the outcome, release), merged where the lock's connection
can also write the ledger. One implementation per lock kind: `postgres/merged.py` (pg-session,
pg-xact), `mysql/merged.py`, `lease/merged.py` (leases on PostgreSQL); `factory.merged_for`
picks it, or None where nothing is merged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, NamedTuple

from lockconsole.model.construct import construct

if TYPE_CHECKING:
    from lockconsole.backends.ledger.store import Ledger
    from lockconsole.model.jobs import Run

SKIP_HELD = "lock held by another session"
LOST = "lock or its connection went away"


class Finished(NamedTuple):
    """What a merged finish did: was the lock held, the outcome it wrote (None: the row was
    no longer ours to close), and was the lock let go."""

    held: bool
    outcome: str | None
    released: bool


class Merged:
    """An attempt's merged statements: `decide` at its start, `finish` at its end.

    `decide` returns the recorded Run ("acquired", "skipped" or "paused"; a paused attempt has
    let the lock go again), or None when the runner must go
    on one statement at a time (the lock's `held` then tells whether it is held). `finish`
    returns what it did, or None with the lock untouched.
    """

    def decide(self, ledger: Ledger, run: Run, *, claims: bool) -> Run | None:
        raise NotImplementedError

    def finish(
        self,
        ledger: Ledger,
        run: Run,
        outcome: str,
        *,
        exit_code: int | None,
        message: str | None,
    ) -> Finished | None:
        raise NotImplementedError


def settle(
    ledger: Ledger,
    run: Run,
    row: tuple[Any, ...],
    params: dict[str, Any],
    *,
    pause_row: tuple[Any, ...],
    let_go: Callable[[], object],
    session_id: int | None,
    slot_done: Callable[[], object] | None = None,
) -> Run | None:
    """What a decide_run answer (outcome, id, claim id, message, ...) means, for every kind.

    "paused": the lock is let go (`let_go`, harmless when it is not held) and the attempt
    recorded in the pause's words (`pause_row`: note, paused_by, paused_at, paused_until).
    No outcome: None, the runner goes on one statement at a time (the pooler guard stopped
    the try, or an earlier attempt of the slot is still "acquired"). "skipped" because the slot
    already ran: `slot_done`, by default `let_go` (the kinds whose decide_run let the lock go
    itself say what its answer meant instead). Otherwise the recorded Run; decide_run's UPDATE
    that changes no row showed that this role may close the attempt.
    """
    outcome, claim_id = row[0], row[2]
    if outcome == "paused":
        let_go()
        return record_pause(ledger, run, pause_row)
    if outcome is None:
        return None
    if outcome == "skipped" and claim_id is not None:
        (slot_done or let_go)()
    ledger.finish_allowed = True
    return recorded(run, row, params, session_id)


def recorded(run: Run, row: tuple[Any, ...], params: dict[str, Any], session_id: int | None) -> Run:
    """`run` as decide_run recorded it: (outcome, id, claim id, message, ...) of its answer."""
    outcome, run_id, _claim_id, message = row[:4]
    # evolve() without its checks: these are Run's own fields (every attempt comes here)
    return construct(
        type(run),
        {
            **run.__dict__,
            "id": int(run_id),
            "outcome": outcome,
            "message": message,
            "session_id": session_id,
            "finished_at": params["finished"] if outcome == "skipped" else None,
        },
    )


def record_pause(ledger: Ledger, run: Run, pause_row: tuple[Any, ...]) -> Run:
    """Record the attempt as "paused" by the control row decide_run answered: the same row the
    one-statement-at-a-time path writes (the pause's reason as its message)."""
    from lockconsole.backends.ledger.pause_check import pause_from
    from lockconsole.model.jobs import evolve

    pause = pause_from(run.job, pause_row, run.started_at)
    return ledger.record(
        evolve(run, outcome="paused", finished_at=ledger.now(), message=pause.reason())
    )
