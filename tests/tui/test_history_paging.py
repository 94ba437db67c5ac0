"""The history pane past the snapshot's page, driven by Pilot against a filled PostgreSQL ledger.

A ledger of its own holds two days of three per-minute jobs on three instances and a nightly
job (26,000 rows, made in bulk); the snapshot loads only its newest 300 attempts. The filter's
`job:` and `instance:` words keep exactly those runs, "m" reads a page of older runs for them
from the ledger, again and again, each further back; the nightly job keeps its LAST in the jobs
pane however many per-minute attempts are newer.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import psycopg
from rich.text import Text

from lockconsole.backends.ledger.store import Ledger
from lockconsole.config.loader import parse_config
from lockconsole.config.urls import parse_url
from lockconsole.console.facade import Console
from lockconsole.model.jobs import Database
from lockconsole.tui.app import LockConsoleApp
from lockconsole.tui.older_runs import PAGE, parse_filter
from lockconsole.tui.widgets.pane_table import PaneTable

from tests.support.helpers import sync, until

SIZE = (160, 50)


def _fill(url: str) -> datetime:
    Ledger(Database("main", parse_url(url))).create_schema()
    with psycopg.connect(url, autocommit=True) as conn:
        [[now]] = conn.execute("select date_trunc('minute', now())").fetchall()
        conn.execute(
            """
            insert into lockconsole_runs
              (job, slot, instance, host, pid, trigger, outcome, started_at, finished_at)
            select 'minutely_' || j, s, 'web-' || i, 'h', i, 'scheduled',
                   case when i = 1 + (j + extract(epoch from s)::bigint / 60) %% 3
                        then 'succeeded' else 'skipped' end, s + i * interval '1 ms', s
            from generate_series(1, 3) j,
                 generate_series(%(now)s - interval '2 days', %(now)s - interval '1 minute',
                                 interval '1 minute') s,
                 generate_series(1, 3) i
            """,
            {"now": now},
        )
        conn.execute(
            """
            insert into lockconsole_runs
              (job, slot, instance, host, pid, trigger, outcome, started_at, finished_at)
            select 'nightly', d, 'web-2', 'h', 2, 'scheduled', 'succeeded', d, d + interval '1 s'
            from generate_series(date_trunc('day', %(now)s) - interval '1 day' + interval '2 h',
                                 date_trunc('day', %(now)s) + interval '2 h',
                                 interval '1 day') d
            where d < %(now)s
            """,
            {"now": now},
        )
    return now.astimezone(UTC)


def _history(app: LockConsoleApp) -> list[list[str]]:
    table = app.dashboard.query_one("#history", PaneTable)
    rows = []
    for key in table.row_keys:
        rows.append([c.plain if isinstance(c, Text) else str(c) for c in table.get_row(key)])
    return rows


@sync
async def test_filter_words_and_older_pages_on_a_filled_ledger(own_database: str) -> None:
    _fill(own_database)
    jobs = "".join(
        f'[jobs.minutely_{j}]\nschedule = "* * * * *"\ncommand = ["true"]\n' for j in (1, 2, 3)
    )
    config = parse_config(
        f'[console]\nhistory_limit = 300\nlookback = "3d"\n[databases.main]\n'
        f'url = "{own_database}"\n{jobs}[jobs.nightly]\nschedule = "0 2 * * *"\n'
        'command = ["true"]\n',
        "test.toml",
        {},
    )
    with Console(config, read_only=True) as console:
        app = LockConsoleApp(console, refresh=60)
        async with app.run_test(size=SIZE) as pilot:
            await until(pilot, lambda: app.snapshot is not None, what="the first snapshot")
            snap = app.snapshot
            assert snap is not None and len(snap.runs) <= 301

            # the nightly job's LAST stays right beside per-minute jobs
            table = app.dashboard.query_one("#jobs", PaneTable)
            nightly = [str(c) for c in table.get_row("nightly")]
            assert nightly[2].startswith("ok web-2"), nightly

            await pilot.press("slash")
            await pilot.press(*"job:minutely_2 instance:web-3")
            await pilot.press("enter")
            await pilot.pause()
            wanted = parse_filter(app.text_filter)
            assert (wanted.job, wanted.instance) == ("minutely_2", "web-3")
            first = [r for r in _history(app) if r[4] == "web-3"]
            assert first and all(r[1] == "minutely_2" for r in _history(app))
            assert all(r[4] == "web-3" for r in _history(app) if r[3] != "-")

            seen = len(_history(app))
            for page in (1, 2):
                await pilot.press("m")
                wanted_rows = seen + PAGE
                await until(
                    pilot,
                    lambda: len(_history(app)) >= wanted_rows,  # noqa: B023  (awaited here)
                    what=f"older page {page}",
                )
                rows = _history(app)
                assert all(r[1] == "minutely_2" for r in rows)
                assert all(r[4] == "web-3" for r in rows if r[3] != "-")
                seen = len(rows)
            older = app.dashboard.older.runs(wanted)
            assert len(older) == 2 * PAGE
            assert {r.job for r in older} == {"minutely_2"} and {r.instance for r in older} == {
                "web-3"
            }
            starts = [r.started_at for r in older]
            assert starts == sorted(starts, reverse=True), "each page further back"
            oldest = min(r.started_at for r in snap.runs if wanted.keeps(r))
            assert min(starts) < oldest - timedelta(hours=5), "past the snapshot's page"
