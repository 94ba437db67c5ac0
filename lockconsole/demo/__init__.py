"""`lockconsole demo`: the triple-charge night, live, on an embedded PostgreSQL.

The pieces, in the order the demo uses them:

    server.py    the embedded PostgreSQL (data under the XDG state directory, reused)
    scenario.py  the billing database: tenants, invoices (with the incident's duplicates),
                 the claims table, the ledger's history, and the config the console reads
    fleet.py     three simulated instances (web-1..3) and a stale lock holder, each its own
                 OS process; instance.py and stale.py are their entry points
    billing.py   the jobs the fleet runs (nightly billing through the idempotency claim)
    headless.py  `--headless`: run for a while and print what happened
    cli.py       the `demo` subcommand that ties them together

Nothing here imports Textual; only the console call in cli.py does, lazily.
"""

from __future__ import annotations

INSTANCES = ("web-1", "web-2", "web-3")
BILLING_JOB = "nightly_billing"
REMINDERS_JOB = "invoice_reminders"
MYSQL_JOB = "usage_rollup"
BILLING_KEY = 4242  # the story's agreed number for "nightly billing is running"
REMINDERS_KEY = 4243
DATABASE = "billing"
DEFAULT_NIGHT_SECONDS = 20
