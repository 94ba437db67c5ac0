"""Old data is marked old, never "ok": the console under a hung database, driven by Pilot
against real PostgreSQL.

The hung database is a loopback proxy of the test's own that accepts every connection and
stops forwarding (connections open and new ones alike): the console's reads wait until their
time budget runs out. Before any error is known the status line stops calling the data ok;
then the status line and the banner give the same age, the pane titles carry it, the alert
from the hung database stays (counted old), and NEXT keeps counting from the schedule.

The clock the app reads is the real one plus a shift the test moves. Thread workers are not
awaited: each test polls with `pilot.pause` up to a deadline.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import psycopg
from rich.text import Text
from textual.widgets import Static

from lockconsole.config.loader import parse_config
from lockconsole.console.facade import Console
from lockconsole.tui.app import LockConsoleApp
from lockconsole.tui.widgets.holders.view import HoldersView
from lockconsole.tui.widgets.pane_table import PaneTable

from tests.support.helpers import sync, until
from tests.support.tcp_proxy import SwitchableProxy, proxied

SIZE = (160, 40)


def rendered(app: LockConsoleApp, widget: str) -> str:
    return str(app.query_one(widget, Static).render())


def job_cells(app: LockConsoleApp, job: str) -> list[str]:
    table = app.dashboard.query_one("#jobs", PaneTable)
    if job not in table.row_keys:
        return []
    return [c.plain if isinstance(c, Text) else str(c) for c in table.get_row(job)]


def one_age(pattern: str, text: str) -> str | None:
    found = re.search(pattern, text)
    return found.group(1) if found else None


@sync
async def test_a_hung_database_is_old_data_never_ok(
    own_database: str, pg_url: str, uid: str, shifted: list[timedelta]
) -> None:
    proxy, flaky_url = proxied(own_database, 5432, SwitchableProxy)
    text = '[console]\nconnect_timeout = "1s"\nstatement_timeout = "4s"\nidle_threshold = "1s"\n'
    for name, url in (("flaky", flaky_url), ("steady", pg_url)):
        text += (
            f'[databases.{name}]\nurl = "{url}"\n[jobs.{name}_{uid}]\ndatabase = "{name}"\n'
            'strategy = "pg-session"\nschedule = "* * * * *"\n'
        )
    config = parse_config(text, "test.toml", {})
    job = f"flaky_{uid}"
    # an idle session of the test's own holds the flaky job's lock: a stale-holder alert there
    holder = psycopg.connect(own_database, autocommit=True)
    holder.execute("select pg_advisory_lock(%s)", (config.job(job).key.value,))
    try:
        with Console(config) as console:
            app = LockConsoleApp(console, refresh=0.5, clock=lambda: datetime.now(UTC) + shifted[0])
            async with app.run_test(size=SIZE) as pilot:

                def flaky_alerts() -> list[object]:
                    snap = app.snapshot
                    return [a for a in (snap.alerts if snap else ()) if a.database == "flaky"]

                await until(pilot, flaky_alerts, what="the flaky database's stale-holder alert")
                await until(pilot, lambda: "flaky ● ok" in rendered(app, "#status"))
                before = len(app.snapshot.alerts)
                proxy.hang()
                # late, and no error known yet: the status line no longer says ok
                status = await until(
                    pilot,
                    lambda: "flaky ◌" in (s := rendered(app, "#status")) and s,
                    what="the late data marked old",
                )
                assert "flaky" not in app.errors, "the old mark came before the error"
                assert "● ok" not in status, status
                await until(pilot, lambda: "flaky" in app.errors, what="the budget to run out")
                await until(pilot, lambda: "steady ● ok" in rendered(app, "#status"))
                status = rendered(app, "#status")
                banner = rendered(app, "#banner")
                assert "flaky ✖ down" in status and "● ok" not in status.split("steady")[0]
                status_age = one_age(r"data (\S+) old", status)
                banner_age = one_age(r"\((\S+) old\)", banner)
                assert status_age is not None and status_age == banner_age, (status, banner)
                assert status_age not in ("0s",) and not status_age.endswith("ms"), status_age
                title = str(app.query_one(HoldersView).border_title)
                assert re.search(r"— \S+ old$", title), title  # the pane says its age
                # the hung database's alert stays, counted old; the count does not drop
                assert len(app.snapshot.alerts) >= before
                assert flaky_alerts(), "the unreadable source's alert was dropped"
                assert re.search(r"\d+ alerts, [1-9]\d* old \(o\)", status), status
                # NEXT counts on from the schedule while the data is old
                shifted[0] = timedelta(minutes=2)
                cells = await until(
                    pilot,
                    lambda: (c := job_cells(app, job)) and "unknown (2m" in c[1] and c,
                    what="the clock moved on",
                )
                nxt = cells[3]
                assert "(in " in nxt and "(in 0s)" not in nxt, nxt
                left = one_age(r"\(in (\S+)\)", nxt)
                assert left is not None and left != "0s", nxt
    finally:
        holder.close()
        proxy.close()
