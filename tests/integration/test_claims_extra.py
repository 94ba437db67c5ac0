"""README promises that had no test of their own: the duplicate inspector never holds the whole
table in memory, and every force-release attempt goes to the log as well as the audit table."""

from __future__ import annotations

import logging
import tracemalloc
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from lockconsole.config.loader import parse_config
from lockconsole.console.facade import Console

ROWS = 200_000  # a few hundred bytes of Python objects each, were they all fetched


def peak_bytes(fn: Callable[[], Any]) -> int:
    """The peak of Python allocations while `fn` runs (what a whole-table fetch would show)."""
    tracemalloc.start()
    try:
        fn()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def test_the_duplicate_inspector_never_holds_the_whole_table_in_memory(pg_url, pg_conn, uid):
    table = f"inv_mem_{uid}"
    pg_conn.execute(
        f"create table {table} (id bigserial primary key, tenant_id int, "
        "period text, amount int, note text)"
    )
    # ROWS rows, of which every 1,000th tenant is billed twice for the same period
    pg_conn.execute(
        f"insert into {table} (tenant_id, period, amount, note) "
        "select g, '2026-11', 990, repeat('x', 40) from generate_series(1, %s) g "
        "union all select g, '2026-11', 990, 'again' from generate_series(1, %s, 1000) g",
        (ROWS, ROWS),
    )
    job = f"mem_{uid}"
    config = parse_config(
        f"""
[databases.main]
url = "{pg_url}"
[jobs.{job}]
[jobs.{job}.idempotency]
table = "{table}"
key = ["tenant_id", "period"]
""",
        "<test>",
    )
    try:
        with Console(config) as console:
            console.duplicate_summary(job)  # connections and imports made outside the measure
            pages: dict[str, Any] = {}

            def inspect() -> None:
                pages["summary"] = console.duplicate_summary(job)
                pages["page"] = console.duplicates(job, page=1, page_size=50)
                pages["rows"] = console.duplicate_rows(job, (1001, "2026-11"))

            inspected = peak_bytes(inspect)
        summary, page = pages["summary"], pages["page"]
        assert (summary.groups, summary.surplus_rows) == (ROWS // 1000, ROWS // 1000)
        assert len(page.groups) == 50 and page.has_more
        assert len(pages["rows"]) == 2
        with psycopg.connect(pg_url) as conn:  # the control: what reading the table costs
            whole = peak_bytes(lambda: conn.execute(f"select * from {table}").fetchall())
        assert whole > 20 * 2**20, "the measure sees a whole-table read"
        assert inspected < whole / 20, (inspected, whole)
    finally:
        pg_conn.execute(f"drop table if exists {table}")


def test_every_release_attempt_goes_to_the_log_as_well_as_the_audit_table(
    pg_url, pg_conn, uid, caplog: pytest.LogCaptureFixture
) -> None:
    job = f"logged_{uid}"
    config = parse_config(f'[databases.main]\nurl = "{pg_url}"\n[jobs.{job}]\n', "<test>")
    holder = psycopg.connect(pg_url, autocommit=True)
    try:
        holder.execute("select pg_advisory_lock(%s)", (config.job(job).key.value,))
        pid = holder.info.backend_pid
        with (
            Console(config) as console,
            caplog.at_level(logging.INFO, "lockconsole.backends.audit"),
        ):
            (h,) = [h for h in console.snapshot().holders if h.job == job]
            result = console.release(h)
        assert result.status == "released", result
        lines = [r.getMessage() for r in caplog.records if r.name == "lockconsole.backends.audit"]
        attempted = [line for line in lines if "result=attempted" in line and f"pid {pid}" in line]
        assert len(attempted) == 1, lines
        entry_id = attempted[0].split("audit id=")[1].split()[0]
        assert any(f"audit id={entry_id} result=released" in line for line in lines), lines
        (row,) = pg_conn.execute(
            "select result from lockconsole_audit where id = %s", (int(entry_id),)
        ).fetchall()
        assert row == ("released",), "the same attempt, by id, in the audit table"
    finally:
        holder.close()
