"""The wire's placeholders: %(name)s numbered $1.. in order of first use, %% a literal %."""

from __future__ import annotations

import pytest

from lockconsole.backends import sqlfiles
from lockconsole.backends.postgres.wire import PlaceholderError, statement


def test_names_are_numbered_in_order_of_first_use_and_reused() -> None:
    stmt = statement("SELECT %(b)s::int, %(a)s, %(b)s::int + 1")
    assert stmt.text == "SELECT $1::int, $2, $1::int + 1"
    assert stmt.names == ("b", "a")


def test_a_doubled_percent_is_one_percent_and_a_lone_one_is_refused() -> None:
    assert statement("SELECT 'a%%b' LIKE %(p)s").text == "SELECT 'a%b' LIKE $1"
    with pytest.raises(PlaceholderError):
        statement("SELECT 5 % %(x)s")
    with pytest.raises(PlaceholderError):
        statement("SELECT %s")


@pytest.mark.parametrize(
    ("name", "dialect"),
    [
        ("decide_run", "postgresql"),
        ("finish_release_run", "postgresql"),
        ("finish_release_lease", "postgresql"),
        ("try_advisory_lock", None),
        ("try_advisory_lock_plain", None),
        ("try_advisory_xact_lock", None),
        ("begin_transaction", None),
        ("savepoint_finish", None),
        ("commit_transaction", None),
    ],
)
def test_every_statement_the_wire_sends_converts(name: str, dialect: str | None) -> None:
    stmt = statement(sqlfiles.load(name, dialect))
    assert "%(" not in stmt.text
    for number in range(1, len(stmt.names) + 1):
        assert f"${number}" in stmt.text
