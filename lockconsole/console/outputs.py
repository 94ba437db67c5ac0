"""A run's kept output, found in the right ledger: run ids are per ledger database, so the
PostgreSQL ledger's run 1 and the MariaDB ledger's run 1 are two runs (`billing:1`, `ops:1`)."""

from __future__ import annotations

from collections.abc import Callable

from lockconsole.backends.ledger.outputs import RunOutput, output_of
from lockconsole.backends.ledger.store import Ledger
from lockconsole.config.loader import Config
from lockconsole.model.errors import UsageError


def find_output(
    config: Config,
    ledger_named: Callable[[str], Ledger],
    run_id: int,
    *,
    ledger: str | None = None,
    job: str | None = None,
) -> RunOutput | None:
    """Run `run_id`'s output from `ledger` (or `job`'s ledger) when given, else from the one
    ledger that has it; an id found in two ledgers is refused (UsageError names both)."""
    if job is not None and job in config.jobs:
        ledger = config.ledger_for(config.jobs[job]).name
    names = sorted({config.ledger_for(j).name for j in config.jobs.values()})
    if ledger is not None and ledger not in names:
        raise UsageError(f"output: {ledger!r} is not a ledger of this config ({', '.join(names)})")
    found = {
        name: out
        for name in ([ledger] if ledger else names)
        if (out := output_of(ledger_named(name), run_id)) is not None
    }
    if len(found) > 1:
        raise UsageError(
            f"output: run {run_id} is in the ledgers {', '.join(found)}: name one, "
            f"e.g. {next(iter(found))}:{run_id}"
        )
    return next(iter(found.values()), None)
