"""The run ledger's columns come from one list, RUN_COLUMNS: the table, the SQL and Run agree."""

from __future__ import annotations

import dataclasses

import pytest

from lockconsole.backends import sqlfiles
from lockconsole.backends.ledger.schema import schema
from lockconsole.backends.ledger.store import COLUMNS
from lockconsole.model.jobs import RUN_COLUMNS, Run

NAMES = [column.name for column in RUN_COLUMNS]


def test_run_has_a_field_for_every_column_and_no_other() -> None:
    assert sorted(field.name for field in dataclasses.fields(Run)) == sorted(NAMES)
    assert list(COLUMNS) == NAMES


def test_the_sqlalchemy_table_has_every_column_in_order() -> None:
    _metadata, table = schema()
    assert [column.name for column in table.columns] == NAMES
    for spec in RUN_COLUMNS:
        assert table.columns[spec.name].nullable == spec.nullable, spec.name
    assert [c.name for c in table.primary_key.columns] == ["id"]


@pytest.mark.parametrize("dialect", ["postgresql", "mysql", "sqlite"])
def test_the_sql_lists_every_column(dialect: str) -> None:
    quote = "`" if dialect == "mysql" else '"'
    select = sqlfiles.load("select_slot_claims", dialect)
    listed = select.split("SELECT ", 1)[1].split("\nFROM", 1)[0]
    assert [name.strip().strip(quote) for name in listed.split(",")] == NAMES
    assert f"{quote}trigger{quote}" in listed
    insert = sqlfiles.load("insert_run", dialect)
    inserted = insert.split("(", 1)[1].split(")", 1)[0]
    assert [name.strip().strip(quote) for name in inserted.split(",")] == NAMES[1:]
    placeholder = ":{}" if dialect == "sqlite" else "%({})s"
    values = insert.split("VALUES (", 1)[1].split(")\n", 1)[0].rstrip(")")
    assert [v.strip() for v in values.split(",")] == [placeholder.format(n) for n in NAMES[1:]]
    assert "{run_" not in select + insert
