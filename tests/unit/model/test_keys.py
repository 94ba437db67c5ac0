"""Lock keys: int64 halves as pg_locks shows them, int4 pairs, name recipes."""

from __future__ import annotations

import hashlib

import pytest

from lockconsole.model import keys
from lockconsole.model.jobs import LockKey

# (key, classid, objid) of single bigint keys as measured in pg_locks: classid holds the high
# 32 bits, objid the low 32 bits, both shown as unsigned oids
PG_LOCKS_TABLE = [
    (-9223372036854775808, 2147483648, 0),
    (-4294967301, 4294967294, 4294967291),
    (-1, 4294967295, 4294967295),
    (1, 0, 1),
    (4294967301, 1, 5),
    (9223372036854775807, 2147483647, 4294967295),
    (0, 0, 0),
]


@pytest.mark.parametrize(("key", "classid", "objid"), PG_LOCKS_TABLE)
def test_split_and_join(key: int, classid: int, objid: int) -> None:
    assert keys.split_int64(key) == (classid, objid)
    assert keys.join_int64(classid, objid) == key
    assert keys.pg_locks_identity(LockKey("int64", key)) == (classid, objid, 1)


def test_round_trip_over_many_keys() -> None:
    for key in [
        *range(-70000, 70000, 997),
        keys.INT64_MIN + 1,
        keys.INT64_MAX - 1,
        2**32,
        -(2**32),
    ]:
        assert keys.join_int64(*keys.split_int64(key)) == key


def test_int4_pairs() -> None:
    # pg_locks shows an int4 pair as classid = key1, objid = key2 as an unsigned oid, objsubid 2
    assert keys.pg_locks_identity(LockKey("int4pair", (7, -2))) == (7, 4294967294, 2)
    for v in (keys.INT4_MIN, -2, -1, 0, 1, keys.INT4_MAX):
        assert keys.oid_to_int4(keys.int4_to_oid(v)) == v
    assert keys.oid_to_int4(4294967294) == -2
    with pytest.raises(ValueError):
        keys.pg_locks_identity(LockKey("name", "x"))


def test_goodjob_md5_recipe_matches_facts() -> None:
    assert keys.name_to_int64("my-lock", "goodjob-md5") == -1323429866322628863


@pytest.mark.parametrize("name", ["my-lock", "", "nightly_billing", "ünïcode ✓"])
def test_sha256_recipe(name: str) -> None:
    expected = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)
    assert keys.name_to_int64(name) == expected
    assert keys.name_to_int64(name, "sha256") == expected
    assert keys.INT64_MIN <= expected <= keys.INT64_MAX


def test_unknown_recipe() -> None:
    with pytest.raises(ValueError, match="unknown key recipe 'crc32'"):
        keys.name_to_int64("x", "crc32")


def test_pg_key_for() -> None:
    # literals: a derived key that changed between releases would move every fleet's lock
    # (sha256: the first 8 bytes, signed; goodjob-md5: PostgreSQL's own md5 of the name)
    assert keys.pg_key_for("job", None) == LockKey("int64", 6812988570718632683, "sha256('job')")
    assert keys.pg_key_for("nightly_billing", None).value == 6934764366447324402
    assert keys.pg_key_for("job", 5) == LockKey("int64", 5)
    assert keys.pg_key_for("job", [1, -1]) == LockKey("int4pair", (1, -1))
    assert keys.pg_key_for("job", "other", "goodjob-md5").value == 8745763988525856444


@pytest.mark.parametrize(
    ("explicit", "message"),
    [
        (2**63, "int64 range"),
        (-(2**63) - 1, "int64 range"),
        ([2**31, 0], "int4 range"),
        ([0, -(2**31) - 1], "int4 range"),
        ([1, 2, 3], "two int4 integers"),
        ([True, 1], "two int4 integers"),
        ([1.0, 2], "two int4 integers"),
        (True, "true/false"),
        (1.5, "not 1.5"),
        ("", "must not be empty"),
        ({}, "a key is"),
    ],
)
def test_pg_key_for_refuses(explicit: object, message: str) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(")) as info:
        keys.pg_key_for("job", explicit)
    assert "\n" not in str(info.value)


def test_name_key_for() -> None:
    assert keys.name_key_for("job", None) == LockKey("name", "job")
    assert keys.name_key_for("job", "n" * 64) == LockKey("name", "n" * 64)
    with pytest.raises(ValueError, match="at most 64 characters"):
        keys.name_key_for("job", "n" * 65)
    with pytest.raises(ValueError, match="must not be empty"):
        keys.name_key_for("job", "")
    with pytest.raises(ValueError, match="lock name"):
        keys.name_key_for("job", 42)
    assert keys.check_name("x") is None
