"""What every bench script shares: servers, the bench databases, timing, result rows, the table.

Every figure is a median over repeated runs, with lockconsole and the raw driver measured
interleaved in the same run (the machine is shared: a neighbour's burst hits both sides).
A row's ratio is always lockconsole's cost over the raw driver's cost (lower is better).

Servers: $LOCKCONSOLE_BENCH_PG_URL (default postgresql://postgres@127.0.0.1:5432/test) and
$LOCKCONSOLE_BENCH_MYSQL_URL (default mysql://root@127.0.0.1:3306/test). The scripts work in
their own database, `lockconsole_bench`, created on both servers when missing, and in tables
named per run; they never touch the shared databases' tables.
"""

from __future__ import annotations

import json
import os
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Iterable, Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit, urlunsplit

PG_SERVER = os.environ.get("LOCKCONSOLE_BENCH_PG_URL", "postgresql://postgres@127.0.0.1:5432/test")
MYSQL_SERVER = os.environ.get("LOCKCONSOLE_BENCH_MYSQL_URL", "mysql://root@127.0.0.1:3306/test")
BENCH_DB = "lockconsole_bench"
RESULTS = Path(__file__).resolve().parent / "results.json"


# -- servers and databases ------------------------------------------------------------------


def with_database(url: str, database: str) -> str:
    parts = urlsplit(url)
    return urlunsplit(parts._replace(path="/" + database))


def pg_url(database: str = BENCH_DB) -> str:
    return with_database(PG_SERVER, database)


def mysql_url(database: str = BENCH_DB) -> str:
    return with_database(MYSQL_SERVER, database)


def ensure_databases() -> None:
    """Create `lockconsole_bench` on PostgreSQL and MariaDB/MySQL when it is missing."""
    import psycopg

    with psycopg.connect(PG_SERVER, autocommit=True) as conn:
        found = conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (BENCH_DB,))
        if found.fetchone() is None:
            conn.execute(f'CREATE DATABASE "{BENCH_DB}"')  # a constant name, not input
    conn = raw_mysql(database=None)
    try:
        with conn.cursor() as cur:
            cur.execute(f"CREATE DATABASE IF NOT EXISTS `{BENCH_DB}`")
    finally:
        conn.close()


def raw_pg(**kwargs: Any) -> Any:
    """A plain psycopg connection to the bench database, autocommit, driver defaults."""
    import psycopg

    return psycopg.connect(pg_url(), autocommit=True, **kwargs)


def raw_mysql(database: str | None = BENCH_DB) -> Any:
    """A plain PyMySQL connection to the bench database, autocommit."""
    import pymysql

    u = urlsplit(MYSQL_SERVER)
    return pymysql.connect(
        host=u.hostname or "127.0.0.1",
        port=u.port or 3306,
        user=u.username or "root",
        password=u.password or "",
        database=database,
        autocommit=True,
        charset="utf8mb4",
    )


def uid() -> str:
    """A short suffix so a run's jobs, keys and tables never collide with anyone's."""
    return uuid.uuid4().hex[:8]


def config(text: str) -> Any:
    """A lockconsole Config from TOML text (checked like a file)."""
    from lockconsole.config.loader import parse_config

    return parse_config(text, "<bench>")


# -- timing ---------------------------------------------------------------------------------


def median(values: Iterable[float]) -> float:
    return statistics.median(list(values))


def timed(fn: Callable[[], Any]) -> float:
    """Seconds one call of `fn` takes."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


def interleave(sides: dict[str, Callable[[], float]], rounds: int) -> dict[str, list[float]]:
    """Call each side once per round, alternating who goes first; every sample, by side."""
    names = list(sides)
    samples: dict[str, list[float]] = {name: [] for name in names}
    for i in range(rounds):
        for name in names if i % 2 == 0 else names[::-1]:
            samples[name].append(sides[name]())
    return samples


def progress(message: str) -> None:
    print(f"  .. {message}", file=sys.stderr, flush=True)


# -- result rows ----------------------------------------------------------------------------


@dataclass
class Row:
    """One figure: lockconsole's cost beside the raw driver's, in `unit`, and its target.

    `target` is a maximum ratio (lockconsole / raw); `limit` an absolute maximum of the
    lockconsole value in `unit` (for figures without a raw side). `status` overrides the
    verdict ("info", "pending", "error").
    """

    name: str
    lockconsole: float | None
    raw: float | None
    unit: str
    target: float | None = None
    limit: float | None = None
    note: str = ""
    status: str | None = None

    @property
    def ratio(self) -> float | None:
        if self.lockconsole is None or not self.raw:
            return None
        return self.lockconsole / self.raw

    @property
    def target_text(self) -> str:
        if self.target is not None:
            return f"<= {self.target:.2f}x"
        if self.limit is not None:
            return f"<= {fmt(self.limit, self.unit)}"
        return "-"

    @property
    def verdict(self) -> str:
        if self.status:
            return self.status
        if self.target is not None and self.ratio is not None:
            return "ok" if self.ratio <= self.target else "MISS"
        if self.limit is not None and self.lockconsole is not None:
            return "ok" if self.lockconsole <= self.limit else "MISS"
        return "info"

    def as_json(self) -> dict[str, Any]:
        out = asdict(self)
        out.update(ratio=self.ratio, verdict=self.verdict, target_text=self.target_text)
        return out


def fmt(value: float | None, unit: str) -> str:
    """A value in the unit it is kept in ("s" values are shown in ms or µs when small)."""
    if value is None:
        return "-"
    if unit == "s":
        if value >= 1:
            return f"{value:.2f} s"
        if value >= 1e-3:
            return f"{value * 1e3:.2f} ms"
        return f"{value * 1e6:.1f} us"
    if unit == "x":
        return f"{value:.2f}x"
    if abs(value) >= 100 or float(value).is_integer():
        return f"{value:,.0f} {unit}"
    return f"{value:.2f} {unit}"


def table(rows: Sequence[Row]) -> str:
    """The table every bench prints: name, lockconsole, raw, ratio, target, verdict; notes below."""
    head = ("name", "lockconsole", "raw", "ratio", "target", "verdict")
    body = [
        (
            r.name,
            fmt(r.lockconsole, r.unit),
            fmt(r.raw, r.unit),
            "-" if r.ratio is None else f"{r.ratio:.2f}x",
            r.target_text,
            r.verdict,
        )
        for r in rows
    ]
    widths = [max(len(line[i]) for line in [head, *body]) for i in range(len(head))]

    def line(cells: Sequence[str]) -> str:
        first = cells[0].ljust(widths[0])
        rest = [c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True)]
        return "  ".join([first, *rest]).rstrip()

    out = [line(head), line(["-" * w for w in widths]), *(line(b) for b in body)]
    notes = [(r.name, r.note) for r in rows if r.note]
    if notes:
        out.append("")
        out += [f"- {name}: {note}" for name, note in notes]
    return "\n".join(out)


def write_results(rows: Sequence[Row], seconds: float, path: Path = RESULTS) -> None:
    """bench/results.json: the rows plus when, where and how long."""
    import platform

    data = {
        "taken_at": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        "host": platform.node(),
        "python": platform.python_version(),
        "cpus": os.cpu_count(),
        "seconds": round(seconds, 1),
        "rows": [r.as_json() for r in rows],
    }
    path.write_text(json.dumps(data, indent=2, default=str) + "\n", encoding="utf-8")


def main(run: Callable[[], list[Row]]) -> None:
    """`python -m bench.<figure>`: run one figure and print its table."""
    ensure_databases()
    start = time.perf_counter()
    rows = run()
    print(table(rows))
    print(f"\n({time.perf_counter() - start:.1f} s)")
