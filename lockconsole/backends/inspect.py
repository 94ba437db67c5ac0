"""Inspectors: list who holds locks in one database, and force-release a holder, guarded.

One module per lock kind (`<kind>/inspect.py`), each with a class that follows `Inspector`;
`factory.open_inspector` picks the one for a database.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from lockconsole.backends.audit import Actor, AuditLog
from lockconsole.model.errors import LockconsoleError
from lockconsole.model.jobs import Job
from lockconsole.model.views import Holder

ReleaseStatus = Literal["released", "holder_changed", "denied", "error"]


@dataclass(frozen=True)
class HolderList:
    holders: tuple[Holder, ...]
    source: str  # where they were read: "pg_locks", "performance_schema.metadata_locks", ...
    notes: tuple[
        str, ...
    ] = ()  # e.g. "details of other roles' sessions hidden: grant pg_read_all_stats"


@dataclass(frozen=True)
class ReleaseResult:
    status: ReleaseStatus
    message: str  # one line for the operator
    target: Holder


class Inspector(Protocol):
    def holders(self, jobs: Sequence[Job]) -> HolderList:
        """Every holder and waiter, in one query; keys mapped back to `jobs` where they match."""

    def release(self, holder: Holder, *, actor: Actor, audit: AuditLog) -> ReleaseResult:
        """End `holder` only if it still holds that key now; audit first, refuse if audit fails."""

    def close(self) -> None: ...


def audited_release(
    holder: Holder,
    target: str,
    act: Callable[[], tuple[ReleaseStatus, str]],
    *,
    actor: Actor,
    audit: AuditLog,
) -> ReleaseResult:
    """Audit the release of `target`, then `act` and record its outcome in the audit entry.

    An audit entry that cannot be written refuses the release: `act` is not called."""
    try:
        entry = audit.begin(actor, "release", target)
    except LockconsoleError as exc:
        return ReleaseResult("error", str(exc), holder)
    status, message = act()
    audit.finish(entry, status, message)
    return ReleaseResult(status, message, holder)
