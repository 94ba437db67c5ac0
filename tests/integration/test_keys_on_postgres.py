"""The GoodJob key recipe computed by PostgreSQL itself, against lockconsole's (the other key
tests need no server: tests/unit/model/test_keys.py)."""

from __future__ import annotations

import pytest

from lockconsole.model import keys


@pytest.mark.parametrize("name", ["my-lock", "", "nightly_billing", "ünïcode ✓", "a" * 300])
def test_goodjob_md5_recipe_matches_postgresql(pg_conn, name: str) -> None:
    row = pg_conn.execute(
        "select ('x' || substr(md5(%s), 1, 16))::bit(64)::bigint", (name,)
    ).fetchone()
    assert row[0] == keys.name_to_int64(name, "goodjob-md5")
