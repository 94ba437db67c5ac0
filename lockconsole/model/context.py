"""What a running job knows of its own attempt: the job, the slot, the run id, the token."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime

# the names a command job finds in its environment, in the order the README lists them
ENVIRONMENT = (
    "LOCKCONSOLE_JOB",
    "LOCKCONSOLE_SLOT",
    "LOCKCONSOLE_RUN_ID",
    "LOCKCONSOLE_INSTANCE",
    "LOCKCONSOLE_TRIGGER",
    "LOCKCONSOLE_FENCING_TOKEN",
)


def qualified_run_id(ledger: str, run_id: int | None) -> str | None:
    """A run id that names its ledger, `billing:42`: ids of two ledgers never collide."""
    return None if run_id is None else f"{ledger}:{run_id}"


@dataclass(frozen=True)
class JobContext:
    """The attempt a job runs under, as the job may key its idempotency or fence its writes."""

    job: str
    slot: datetime
    run_id: str | None  # qualified: "<ledger database>:<id>"
    instance: str
    trigger: str
    fencing_token: int | None = None

    @property
    def slot_text(self) -> str:
        """The slot in ISO 8601, in UTC: the same text on every instance, for one slot."""
        return self.slot.astimezone(UTC).isoformat()

    def environment(self) -> dict[str, str]:
        """The `LOCKCONSOLE_*` variables of a command job; an unknown value is left unset."""
        values = (
            self.job,
            self.slot_text,
            self.run_id,
            self.instance,
            self.trigger,
            None if self.fencing_token is None else str(self.fencing_token),
        )
        # an environment cannot carry NUL: such a value is left out rather than cut
        return {
            name: value
            for name, value in zip(ENVIRONMENT, values, strict=True)
            if value is not None and "\0" not in value
        }
