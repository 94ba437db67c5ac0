"""Prune every ledger a configuration names, each under an audit row (`lockconsole prune`, and
`schedule`'s daily prune).

The audit row is written first ("attempted"), in the ledger's own database: when it cannot be
written, that ledger is not pruned. A dry run changes nothing, so it writes no audit row.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import timedelta

from lockconsole.backends.audit import Actor, AuditLog  # noqa: F401  (Actor: public here)
from lockconsole.backends.ledger.retention.prune import BATCH, PruneReport, prune
from lockconsole.config.loader import Config
from lockconsole.model.jobs import Database
from lockconsole.text.times import span


def ledgers(config: Config) -> list[Database]:
    """The ledger databases of the configured jobs (or `ledger_database`), by name."""
    names = {config.ledger_for(job).name for job in config.jobs.values()}
    if config.ledger_database:
        names.add(config.ledger_database)
    return [config.databases[name] for name in sorted(names)]


def audited_prune(
    database: Database,
    actor: Actor,
    older_than: timedelta,
    *,
    dry_run: bool = False,
    batch_size: int = BATCH,
    stop: Callable[[], bool] = lambda: False,
) -> PruneReport:
    """Prune one ledger (see prune.prune); audited unless dry. `actor`: who asked (a person,
    or `schedule`@instance for the daily prune)."""
    if dry_run:
        return prune(database, older_than, dry_run=True, batch_size=batch_size, stop=stop)
    audit = AuditLog(database)
    try:
        target = f"ledger {database.name}: rows older than {span(older_than)}"
        entry = audit.begin(actor, "prune", target)
        try:
            report = prune(database, older_than, batch_size=batch_size, stop=stop)
        except BaseException as exc:
            audit.finish(entry, "error", " ".join(str(exc).split()) or type(exc).__name__)
            raise
        audit.finish(entry, "busy" if report.busy else "pruned", report.line())
        return report
    finally:
        audit.close()
