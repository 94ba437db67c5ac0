"""The jobs the demo fleet runs (callables named in the demo config).

nightly_billing charges every tenant renewing tonight, one transaction per tenant: first
lockconsole.idempotency.claim() on billing_claims (PRIMARY KEY (tenant_id, period)), and only
if this call inserted the claim, the invoice. A rerun of the same night, or a second holder
after a dropped lock connection, finds the claims taken and charges nobody twice.
"""

from __future__ import annotations

import logging
import os
import time
from datetime import UTC, datetime
from functools import cache
from typing import TYPE_CHECKING

from lockconsole.config.loader import Config, load_config

if TYPE_CHECKING:
    from lockconsole.engine.runner import Attempt

log = logging.getLogger(__name__)

PACE_ENV = "LOCKCONSOLE_DEMO_PACE"  # seconds per tenant, set by the fleet from --night-seconds
DEFAULT_PACE = 0.03
SELECT_RENEWING = "SELECT id, amount_cents FROM tenants WHERE renewal_day = 1 ORDER BY id"
INSERT_INVOICE = (
    "INSERT INTO invoices (tenant_id, period, amount_cents, instance, run_id) "
    "VALUES (%s, %s, %s, %s, %s)"
)


class BillingStopped(RuntimeError):
    """The fleet is stopping: billing ends between tenants (the claims make a rerun safe)."""


def period_for(slot: datetime) -> str:
    """The billing period of a (compressed) night: its slot, to the second, in UTC."""
    return slot.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S")


CONFIG_NAME = "lockconsole-demo.toml"  # what the demo writes into its state directory


@cache
def _config() -> Config:
    """The demo's config: $LOCKCONSOLE_CONFIG (the fleet's processes get it), else the file
    the demo wrote into its state directory (a console's trigger runs the job in its own
    process, which was opened with --config or by the demo, not through the environment)."""
    if os.environ.get("LOCKCONSOLE_CONFIG"):
        return load_config()
    from lockconsole.demo.server import state_dir

    return load_config(str(state_dir() / CONFIG_NAME))


def _pace() -> float:
    try:
        return max(0.0, float(os.environ.get(PACE_ENV, DEFAULT_PACE)))
    except ValueError:
        return DEFAULT_PACE


def nightly_billing(attempt: Attempt) -> None:
    """Charge each renewing tenant once for this night, claim first (see the module doc)."""
    from lockconsole.backends.connect import connect_pg
    from lockconsole.idempotency import claim

    run = attempt.run
    database = _config().database_for(attempt.job)
    period, pace = period_for(run.slot), _pace()
    conn = connect_pg(database.url, application_name=f"billing@{run.instance}", autocommit=False)
    charged = already = 0
    try:
        tenants = conn.execute(SELECT_RENEWING).fetchall()
        conn.commit()
        for tenant_id, cents in tenants:
            attempt.check()  # LockLostError once the watchdog saw the lock go
            if attempt.stop.is_set():
                raise BillingStopped(
                    f"stopped after {charged + already} of {len(tenants)} tenants; "
                    "the claims make a rerun of this night safe"
                )
            values = {
                "tenant_id": tenant_id,
                "period": period,
                "instance": run.instance,
                "run_id": run.id,
            }
            if claim(conn, "billing_claims", values, key=("tenant_id", "period")):
                conn.execute(INSERT_INVOICE, (tenant_id, period, cents, run.instance, run.id))
                charged += 1
            else:
                already += 1
            conn.commit()
            attempt.stop.wait(pace)
    finally:
        conn.close()
    log.info(
        "billed period=%s charged=%d already_billed=%d instance=%s",
        period,
        charged,
        already,
        run.instance,
    )


def invoice_reminders(attempt: Attempt) -> None:
    """Send the reminders (a short stand-in): the job whose lock the stale session keeps."""
    for _ in range(10):
        attempt.check()
        time.sleep(0.1)
    log.info("sent reminders instance=%s", attempt.run.instance)


def usage_rollup(attempt: Attempt) -> None:
    """The MySQL app's nightly job (GET_LOCK): roll up usage, a few seconds of work."""
    for _ in range(120):  # as long as tonight's billing, so its GET_LOCK holder shows
        attempt.check()
        if attempt.stop.wait(_pace()):
            raise BillingStopped("stopped by the fleet")
    log.info("rolled up usage instance=%s", attempt.run.instance)
