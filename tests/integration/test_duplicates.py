"""The duplicate inspector against real PostgreSQL, MariaDB/MySQL and SQLite.

Each test makes its own invoices_<uid> table without a unique key, fills it like the billing
incident (120 tenants charged three times in one period, 30 charged twice by one retried run,
a clean period) and drops it afterwards.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy import (
    Column,
    Engine,
    Integer,
    MetaData,
    Numeric,
    String,
    Table,
    delete,
    inspect,
    select,
    text,
)
from sqlalchemy.exc import IntegrityError

from lockconsole.backends import duplicates
from lockconsole.backends.sa import engine_for
from lockconsole.config.loader import parse_config
from lockconsole.config.urls import parse_url
from lockconsole.model.errors import ConfigError, DatabaseError
from lockconsole.model.jobs import Database, Idempotency

TRIPLED = range(1, 121)  # tenants charged three times in 2026-11, by runs 2, 3 and 4
PAIRED = range(1, 31)  # tenants charged twice in 2026-12, both by run 5 (a retry loop)
GROUPS = len(TRIPLED) + len(PAIRED)  # 150
SURPLUS = 2 * len(TRIPLED) + len(PAIRED)  # 270


@pytest.fixture
def url(dialect_url: str) -> str:
    return dialect_url


@pytest.fixture
def engine(url: str) -> Iterator[Engine]:
    eng = engine_for(parse_url(url))
    yield eng
    eng.dispose()


def incident_rows() -> list[dict[str, Any]]:
    """702 invoices: a clean 2026-10, a tripled 2026-11, a paired 2026-12, two NULL tenants."""
    out = [dict(tenant_id=t, period="2026-10", amount=10, run_id=1) for t in range(1, 201)]
    for t in range(1, 201):
        runs = (2, 3, 4) if t in TRIPLED else (2,)
        out += [dict(tenant_id=t, period="2026-11", amount=10, run_id=r) for r in runs]
    for t in PAIRED:
        out += [dict(tenant_id=t, period="2026-12", amount=10, run_id=5)] * 2
    out += [dict(tenant_id=None, period="2026-12", amount=10, run_id=6)] * 2  # not duplicates
    return out


@pytest.fixture
def invoices(engine: Engine, uid: str) -> Iterator[Table]:
    """invoices_<uid>(id, tenant_id, period, amount, run_id), no unique key, incident data."""
    t = Table(
        f"invoices_{uid}",
        MetaData(),
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("tenant_id", Integer),
        Column("period", String(7), nullable=False),
        Column("amount", Numeric(10, 2), nullable=False),
        Column("run_id", Integer),
    )
    t.create(engine)
    try:
        with engine.begin() as conn:
            conn.execute(t.insert(), incident_rows())
        yield t
    finally:
        t.drop(engine, checkfirst=True)


def spec_of(t: Table, run_column: str | None = "run_id") -> Idempotency:
    return Idempotency(t.name, ("tenant_id", "period"), run_column)


def test_summary_counts_groups_and_surplus(engine: Engine, invoices: Table) -> None:
    found = duplicates.summary(engine, spec_of(invoices))
    assert found == duplicates.DuplicateSummary(GROUPS, SURPLUS, False)


def test_summary_accepts_a_database(url: str, invoices: Table) -> None:
    found = duplicates.summary(Database("main", parse_url(url)), spec_of(invoices))
    assert (found.groups, found.surplus_rows) == (GROUPS, SURPLUS)


def test_groups_page_in_key_order_with_run_ids(engine: Engine, invoices: Table) -> None:
    first = duplicates.groups(engine, spec_of(invoices))
    assert first.has_more
    assert len(first.groups) == 50
    g = first.groups
    # tenants 1..30 have two groups each: 2026-11 (three runs) then 2026-12 (one run twice)
    assert (g[0].key, g[0].count, g[0].run_ids) == ((1, "2026-11"), 3, (2, 3, 4))
    assert (g[1].key, g[1].count, g[1].run_ids) == ((1, "2026-12"), 2, (5,))
    assert g[2].key == (2, "2026-11")
    assert g[49].key == (25, "2026-12")


def test_groups_offset_and_keyset_pages_agree(engine: Engine, invoices: Table) -> None:
    spec = spec_of(invoices)
    by_offset, page = [], 0
    while True:
        p = duplicates.groups(engine, spec, page=page, page_size=40)
        by_offset.append(p)
        if not p.has_more:
            break
        page += 1
    assert [len(p.groups) for p in by_offset] == [40, 40, 40, 30]
    by_keyset, after = [], None
    while True:
        p = duplicates.groups(engine, spec, page_size=40, after=after)
        by_keyset.append(p)
        if not p.has_more:
            break
        after = p.groups[-1].key
    assert by_keyset == by_offset
    keys = [g.key for p in by_offset for g in p.groups]
    assert keys == sorted(keys) and len(set(keys)) == GROUPS
    assert duplicates.groups(engine, spec, page=4, page_size=40).groups == ()
    last = duplicates.groups(engine, spec, after=(120, "2026-11"))
    assert last == duplicates.DuplicatePage((), False)


def test_groups_without_run_column_and_one_column_key(engine: Engine, invoices: Table) -> None:
    p = duplicates.groups(engine, spec_of(invoices, None), page_size=2)
    assert [(g.key, g.count, g.run_ids) for g in p.groups] == [
        ((1, "2026-11"), 3, ()),
        ((1, "2026-12"), 2, ()),
    ]
    by_tenant = Idempotency(invoices.name, ("tenant_id",), "run_id")
    assert duplicates.summary(engine, by_tenant).groups == 200  # every tenant has >1 invoice
    p = duplicates.groups(engine, by_tenant, page_size=3, after=(198,))
    got = [(g.key, g.count, g.run_ids) for g in p.groups]
    assert got == [((199,), 2, (1, 2)), ((200,), 2, (1, 2))]
    assert not p.has_more


def test_rows_of_one_group(engine: Engine, invoices: Table) -> None:
    found = duplicates.rows(engine, spec_of(invoices), (7, "2026-11"))
    assert [r["run_id"] for r in found] == [2, 3, 4]
    assert set(found[0]) == {"id", "tenant_id", "period", "amount", "run_id"}
    assert [r["id"] for r in found] == sorted(r["id"] for r in found)
    assert duplicates.rows(engine, spec_of(invoices), (7, "1999-01")) == []
    assert len(duplicates.rows(engine, spec_of(invoices), (7, "2026-11"), limit=2)) == 2


def test_fix_ddl_fails_with_duplicates_then_works(engine: Engine, invoices: Table) -> None:
    spec = spec_of(invoices)
    dialect = engine.dialect.name
    before = duplicates.summary(engine, spec)
    ddl = duplicates.fix_ddl(dialect, spec, before)
    assert ddl.startswith(f"-- remove the {SURPLUS} surplus rows of the {GROUPS} duplicated")
    assert "UNIQUE" in ddl.upper()
    with pytest.raises(IntegrityError), engine.begin() as conn:
        conn.exec_driver_sql(ddl)
    assert duplicates.summary(engine, spec).has_unique_key is False

    keep: dict[tuple[Any, ...], int] = {}
    extra = []
    with engine.connect() as conn:
        for id_, tenant, period in conn.execute(
            select(invoices.c.id, invoices.c.tenant_id, invoices.c.period).order_by("id")
        ):
            if tenant is not None and (tenant, period) in keep:
                extra.append(id_)
            keep.setdefault((tenant, period), id_)
    with engine.begin() as conn:
        conn.execute(delete(invoices).where(invoices.c.id.in_(extra)))
    clean = duplicates.summary(engine, spec)
    assert clean == duplicates.DuplicateSummary(0, 0, False)
    ddl = duplicates.fix_ddl(dialect, spec, clean)
    assert not ddl.startswith("--")
    with engine.begin() as conn:
        conn.exec_driver_sql(ddl)
    after = duplicates.summary(engine, spec)
    assert after == duplicates.DuplicateSummary(0, 0, True)
    assert duplicates.fix_ddl(dialect, spec, after).startswith("-- ")
    with pytest.raises(IntegrityError), engine.begin() as conn:
        conn.execute(invoices.insert(), dict(tenant_id=7, period="2026-11", amount=1, run_id=9))


def test_fix_ddl_without_summary_warns() -> None:
    ddl = duplicates.fix_ddl("postgresql", Idempotency("invoices", ("tenant_id", "period")))
    first, second = ddl.splitlines()
    assert first.startswith("-- this fails while invoices holds duplicate")
    assert second == (
        "ALTER TABLE invoices ADD CONSTRAINT invoices_tenant_id_period_key "
        "UNIQUE (tenant_id, period);"
    )


def test_has_unique_key_detection(engine: Engine, uid: str) -> None:
    md = MetaData()
    pk = Table(f"pk_{uid}", md, Column("a", Integer, primary_key=True), Column("b", Integer))
    wide = Table(
        f"wide_{uid}",
        md,
        Column("id", Integer, primary_key=True),
        Column("a", Integer),
        Column("b", Integer),
        Column("c", Integer),
    )
    md.create_all(engine)
    try:
        with engine.begin() as conn:
            clean = duplicates.DuplicateSummary(0, 0, False)
            ddl = duplicates.fix_ddl(engine.dialect.name, Idempotency(wide.name, ("a", "b")), clean)
            conn.exec_driver_sql(ddl)
        assert duplicates.summary(engine, Idempotency(pk.name, ("a",))).has_unique_key is True
        assert duplicates.summary(engine, Idempotency(pk.name, ("b",))).has_unique_key is False
        cases = [(("a", "b"), True), (("b", "a"), True), (("a",), False), (("a", "b", "c"), False)]
        for key, expect in cases:
            assert duplicates.summary(engine, Idempotency(wide.name, key)).has_unique_key is expect
    finally:
        md.drop_all(engine)


def test_export_csv(engine: Engine, invoices: Table, tmp_path: Path) -> None:
    path = tmp_path / "dups.csv"
    n = duplicates.export_csv(engine, spec_of(invoices), path)
    assert n == 3 * len(TRIPLED) + 2 * len(PAIRED)
    with path.open(newline="", encoding="utf-8") as f:
        table = list(csv.reader(f))
    assert table[0] == ["id", "tenant_id", "period", "amount", "run_id"]
    body = table[1:]
    assert len(body) == n
    assert [r[1:3] for r in body[:5]] == [["1", "2026-11"]] * 3 + [["1", "2026-12"]] * 2
    assert {r[2] for r in body} == {"2026-11", "2026-12"}
    buf = io.StringIO()
    assert duplicates.export_csv(engine, spec_of(invoices), buf) == n
    with path.open(newline="", encoding="utf-8") as f:
        assert buf.getvalue() == f.read()


def test_reserved_word_and_mixed_case_names(engine: Engine, uid: str) -> None:
    t = Table(
        f"Order_{uid}",
        MetaData(),
        Column("id", Integer, primary_key=True, autoincrement=True),
        Column("order", Integer),
        Column("Group", String(10)),
        Column("select", Integer),
    )
    t.create(engine)
    try:
        with engine.begin() as conn:
            conn.execute(t.insert(), [{"order": 1, "Group": "a", "select": r} for r in (1, 2, 2)])
            conn.execute(t.insert(), [{"order": 2, "Group": "a", "select": 1}])
        spec = Idempotency(t.name, ("order", "Group"), "select")
        assert duplicates.summary(engine, spec) == duplicates.DuplicateSummary(1, 2, False)
        page = duplicates.groups(engine, spec)
        assert [(g.key, g.count, g.run_ids) for g in page.groups] == [((1, "a"), 3, (1, 2))]
        assert duplicates.groups(engine, spec, after=(1, "a")).groups == ()
        assert len(duplicates.rows(engine, spec, (1, "a"))) == 3
        assert duplicates.export_csv(engine, spec, io.StringIO()) == 3
        with engine.begin() as conn:
            conn.execute(delete(t).where(t.c.select == 2))
        ddl = duplicates.fix_ddl(engine.dialect.name, spec, duplicates.summary(engine, spec))
        with engine.begin() as conn:
            conn.exec_driver_sql(ddl)
        assert duplicates.summary(engine, spec).has_unique_key is True
    finally:
        t.drop(engine, checkfirst=True)


def test_schema_qualified_table(engine: Engine, uid: str) -> None:
    dialect = engine.dialect.name
    schema = {"postgresql": f"lc_{uid}", "sqlite": "main"}.get(dialect, engine.url.database)
    if dialect == "postgresql":
        with engine.begin() as conn:
            conn.exec_driver_sql(f"CREATE SCHEMA lc_{uid}")
    t = Table(
        f"inv_{uid}",
        MetaData(),
        Column("id", Integer, primary_key=True),
        Column("tenant_id", Integer),
        Column("period", String(7)),
        schema=schema,
    )
    try:
        t.create(engine)
        with engine.begin() as conn:
            conn.execute(t.insert(), [dict(id=i, tenant_id=1, period="p") for i in (1, 2)])
        spec = Idempotency(f"{schema}.{t.name}", ("tenant_id", "period"))
        assert duplicates.summary(engine, spec) == duplicates.DuplicateSummary(1, 1, False)
        assert [r["id"] for r in duplicates.rows(engine, spec, (1, "p"))] == [1, 2]
    finally:
        t.drop(engine, checkfirst=True)
        if dialect == "postgresql":
            with engine.begin() as conn:
                conn.exec_driver_sql(f"DROP SCHEMA IF EXISTS lc_{uid}")


def test_missing_column_or_table_is_one_line_config_error(engine: Engine, invoices: Table) -> None:
    bad = Idempotency(invoices.name, ("tenant", "period"), "run_id")
    for call in (
        lambda: duplicates.summary(engine, bad),
        lambda: duplicates.groups(engine, bad),
        lambda: duplicates.rows(engine, bad, (1, "x")),
        lambda: duplicates.export_csv(engine, bad, io.StringIO()),
    ):
        with pytest.raises(ConfigError) as err:
            call()
        msg = str(err.value)
        assert msg.startswith(f"table {invoices.name} has no column 'tenant'")
        assert "\n" not in msg
    bad_run = Idempotency(invoices.name, ("tenant_id", "period"), "run")
    with pytest.raises(ConfigError, match=r"has no column 'run' \(it has: id, tenant_id"):
        duplicates.groups(engine, bad_run)
    gone = Idempotency(f"{invoices.name}_gone", ("tenant_id",), "run_id")
    for call in (
        lambda: duplicates.summary(engine, gone),
        lambda: duplicates.groups(engine, gone),
        lambda: duplicates.rows(engine, gone, (1,)),
        lambda: duplicates.export_csv(engine, gone, io.StringIO()),
    ):
        with pytest.raises(ConfigError, match=f"table {gone.table} does not exist in ") as err:
            call()
        assert "\n" not in str(err.value)


def test_unreachable_database_is_a_database_error_without_password() -> None:
    for raw in (
        "postgresql://billing:s3cr3t-pw@127.0.0.1:1/billing",
        "mysql://billing:s3cr3t-pw@127.0.0.1:1/billing",
    ):
        with pytest.raises(DatabaseError) as err:
            duplicates.summary(Database("main", parse_url(raw)), Idempotency("invoices", ("a",)))
        msg = str(err.value)
        assert "s3cr3t-pw" not in msg and "\n" not in msg
        assert "***" in msg and "127.0.0.1:1" in msg


def test_injection_is_refused_by_config_and_table_survives(
    url: str, engine: Engine, invoices: Table
) -> None:
    toml = f"""
[databases.main]
url = "{url}"

[jobs.nightly]
strategy = "lease"

[jobs.nightly.idempotency]
table = "{invoices.name}; DROP TABLE {invoices.name}"
key = ["tenant_id", "period"]
"""
    with pytest.raises(ConfigError, match="not a plain table or column name"):
        parse_config(toml)
    with pytest.raises(ValueError):
        duplicates.summary(engine, Idempotency(f"{invoices.name}; DROP TABLE x", ("tenant_id",)))
    with pytest.raises(ValueError):
        duplicates.groups(engine, Idempotency(invoices.name, ('tenant_id" --',)))
    assert inspect(engine).has_table(invoices.name)
    with engine.connect() as conn:
        assert conn.execute(text(f"SELECT count(*) FROM {invoices.name}")).scalar() == 702
