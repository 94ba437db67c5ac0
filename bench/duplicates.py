"""Duplicates: the first page of duplicate keys in 2,000,000 invoices (0.1% of keys doubled).

lockconsole's `duplicates.groups(engine, spec)` (page 0, 50 groups, SQLAlchemy Core on a kept
engine) against the raw `SELECT key, count(*) ... GROUP BY key HAVING count(*) > 1 ORDER BY key
LIMIT 50` through psycopg, interleaved. A second figure asks for each group's run ids too
(run_column), which joins the page back to the table. Peak RSS growth of a first page is
measured in a fresh subprocess for each side (resource.getrusage).

The table (`bench_invoices_2m` in the bench database, no unique key, as a table with
duplicates has) is built with generate_series and kept for the next run when it still has
the right row count; `DROP DATABASE lockconsole_bench` removes it with the rest.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from .common import Row, config, interleave, main, median, pg_url, progress, raw_pg, timed

TABLE = "bench_invoices_2m"
ROWS = 2_000_000
DOUBLED = 2_000  # keys that appear twice: 0.1% of the keys
ROUNDS = int(os.environ.get("LOCKCONSOLE_BENCH_DUP_ROUNDS", 5))
TARGET = 1.2
RSS_LIMIT_MB = 50.0
RAW_PAGE = (
    f"SELECT tenant_id, period, count(*) FROM {TABLE} GROUP BY tenant_id, period "
    "HAVING count(*) > 1 ORDER BY tenant_id, period LIMIT 50"
)
RSS_CHILD = """
import json, resource, sys
side, url = sys.argv[1], sys.argv[2]
def peak():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
if side == "lockconsole":
    from bench.duplicates import spec_and_engine
    from lockconsole.backends.duplicates import groups
    spec, engine = spec_and_engine(url, run_column=False)
    engine.connect().close()
    before = peak()
    found = len(groups(engine, spec).groups)
else:
    import psycopg
    conn = psycopg.connect(url, autocommit=True)
    before = peak()
    found = len(conn.execute(sys.argv[3]).fetchall())
print(json.dumps({"growth_mb": peak() - before, "groups": found}))
"""


def spec_and_engine(url: str, *, run_column: bool) -> tuple[object, object]:
    from lockconsole.backends.sa import engine_for
    from lockconsole.model.jobs import Idempotency

    db = config(f'[databases.main]\nurl = "{url}"\n').databases["main"]
    spec = Idempotency(TABLE, ("tenant_id", "period"), "run_id" if run_column else None)
    return spec, engine_for(db.url)


def ensure_table() -> str:
    """Build the invoices table unless it is there with the right row count; what was done."""
    with raw_pg() as conn:
        exists = conn.execute("SELECT to_regclass(%s)", (TABLE,)).fetchone()[0]
        if exists is not None:
            count = conn.execute(f"SELECT count(*) FROM {TABLE}").fetchone()[0]
            if count == ROWS:
                return f"reused {TABLE} ({count:,} rows)"
            conn.execute(f"DROP TABLE {TABLE}")  # our own table, in our own database
        start = time.perf_counter()
        conn.execute(f"""CREATE TABLE {TABLE} (
            id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
            tenant_id integer, period text, amount numeric(10, 2), run_id integer)""")
        step = (ROWS - DOUBLED) // DOUBLED
        conn.execute(
            f"INSERT INTO {TABLE} (tenant_id, period, amount, run_id) "
            "SELECT g / 20, 'p' || lpad((g %% 20)::text, 2, '0'), 49.00, 1 "
            "FROM generate_series(1, %s) g",
            (ROWS - DOUBLED,),
        )
        conn.execute(
            f"INSERT INTO {TABLE} (tenant_id, period, amount, run_id) "
            "SELECT g / 20, 'p' || lpad((g %% 20)::text, 2, '0'), 49.00, 2 "
            "FROM generate_series(%s, %s, %s) g",
            (step, step * DOUBLED, step),
        )
        conn.execute(f"VACUUM ANALYZE {TABLE}")
        return f"built {TABLE} ({ROWS:,} rows) in {time.perf_counter() - start:.1f} s"


def rss_growth(side: str) -> dict[str, float]:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    proc = subprocess.run(
        [sys.executable, "-c", RSS_CHILD, side, pg_url(), RAW_PAGE],
        capture_output=True,
        text=True,
        cwd=root,
        check=False,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"RSS child ({side}) failed: {proc.stderr.strip()[-300:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def run() -> list[Row]:
    from lockconsole.backends.duplicates import groups

    built = ensure_table()
    print(f"duplicates: {built}", file=sys.stderr)
    spec, engine = spec_and_engine(pg_url(), run_column=False)
    spec_runs, _ = spec_and_engine(pg_url(), run_column=True)
    raw = raw_pg()
    try:
        first = groups(engine, spec)  # warm up: engine pool, statement cache, table in cache
        raw_first = raw.execute(RAW_PAGE).fetchall()
        same = [g.key + (g.count,) for g in first.groups] == [tuple(r) for r in raw_first]
        progress(f"duplicates: {ROUNDS} first pages per side")
        sides = {
            "lockconsole": lambda: timed(lambda: groups(engine, spec)),
            "runs": lambda: timed(lambda: groups(engine, spec_runs)),
            "raw": lambda: timed(lambda: raw.execute(RAW_PAGE).fetchall()),
        }
        got = {k: median(v) for k, v in interleave(sides, ROUNDS).items()}
    finally:
        raw.close()
        engine.dispose()  # type: ignore[attr-defined]
    progress("duplicates: peak RSS of a first page, in subprocesses")
    lc_rss, raw_rss = rss_growth("lockconsole"), rss_growth("raw")
    return [
        Row(
            "duplicates: first page (2M rows)",
            got["lockconsole"],
            got["raw"],
            "s",
            TARGET,
            note=f"{built}; {len(first.groups)} groups, same as raw: {'yes' if same else 'NO'}",
        ),
        Row(
            "duplicates: first page with run ids",
            got["runs"],
            got["raw"],
            "s",
            TARGET,
            note="run_column = run_id: the page joined back to the table for each group's runs",
        ),
        Row(
            "duplicates: peak RSS growth",
            lc_rss["growth_mb"],
            raw_rss["growth_mb"],
            "MB",
            limit=RSS_LIMIT_MB,
            note="ru_maxrss after the first page minus before, fresh process",
        ),
    ]


if __name__ == "__main__":
    main(run)
