"""Lock names <-> lock keys: int64 (objsubid 1), int4 pairs (objsubid 2), MySQL/lease names.

The default recipe maps a name to a PostgreSQL int64 key with the first 8 bytes of its
SHA-256 digest, big-endian, signed:

    int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big", signed=True)

`goodjob-md5` is GoodJob's recipe, equal to the SQL
``('x'||substr(md5(name),1,16))::bit(64)::bigint``, for locks taken by other apps.
"""

from __future__ import annotations

import hashlib

from lockconsole.model.jobs import LockKey

INT64_MIN, INT64_MAX = -(1 << 63), (1 << 63) - 1
INT4_MIN, INT4_MAX = -(1 << 31), (1 << 31) - 1
MAX_NAME_LENGTH = 64  # MySQL >= 5.7.5 caps GET_LOCK names at 64 characters; ShedLock's VARCHAR(64)
RECIPES = ("sha256", "goodjob-md5")
_KEY_HELP = "a key is an int64 integer, a pair of int4 integers like [7, -2], or a name"


def name_to_int64(name: str, recipe: str = "sha256") -> int:
    """The int64 key that `recipe` derives from `name`."""
    if recipe == "sha256":
        digest = hashlib.sha256(name.encode()).digest()
    elif recipe == "goodjob-md5":
        digest = hashlib.md5(name.encode()).digest()
    else:
        raise ValueError(f"unknown key recipe {recipe!r} (choose {', '.join(RECIPES)})")
    return int.from_bytes(digest[:8], "big", signed=True)


def split_int64(key: int) -> tuple[int, int]:
    """(classid, objid) as pg_locks shows an int64 key."""
    u = key & 0xFFFF_FFFF_FFFF_FFFF
    return u >> 32, u & 0xFFFF_FFFF


def join_int64(classid: int, objid: int) -> int:
    """The int64 key behind a pg_locks (classid, objid) pair with objsubid = 1."""
    u = (classid << 32) | objid
    return u - (1 << 64) if u >= 1 << 63 else u


def oid_to_int4(oid: int) -> int:
    """An int4 key as written by the app, from the unsigned oid pg_locks shows."""
    return oid - (1 << 32) if oid >= 1 << 31 else oid


def int4_to_oid(value: int) -> int:
    return value & 0xFFFF_FFFF


def pg_locks_identity(key: LockKey) -> tuple[int, int, int]:
    """(classid, objid, objsubid) under which pg_locks lists `key`."""
    if key.kind == "int64":
        classid, objid = split_int64(key.int64())
        return classid, objid, 1
    if key.kind == "int4pair":
        a, b = key.int4pair()
        return int4_to_oid(a), int4_to_oid(b), 2
    raise ValueError(f"a {key.kind} key has no pg_locks identity")


def check_name(name: str) -> str | None:
    """Why `name` cannot be a MySQL lock or lease name, or None if it can."""
    if not name.strip():
        return "a lock name must not be empty"
    if len(name) > MAX_NAME_LENGTH:
        return (
            f"a lock name is at most {MAX_NAME_LENGTH} characters (MySQL GET_LOCK, ShedLock); "
            f"this one has {len(name)}"
        )
    return None


def pg_key_for(job_name: str, explicit: object, recipe: str = "sha256") -> LockKey:
    """A job's PostgreSQL key: explicit int64, [int4, int4], a name to hash, or the job name."""
    if explicit is None:
        return LockKey("int64", name_to_int64(job_name, recipe), f"{recipe}({job_name!r})")
    if isinstance(explicit, bool):
        raise ValueError(f"{_KEY_HELP}, not true/false")
    if isinstance(explicit, int):
        if not INT64_MIN <= explicit <= INT64_MAX:
            raise ValueError(f"{explicit} is outside the int64 range ({INT64_MIN} to {INT64_MAX})")
        return LockKey("int64", explicit)
    if isinstance(explicit, str):
        if not explicit.strip():
            raise ValueError("a key name must not be empty")
        return LockKey("int64", name_to_int64(explicit, recipe), f"{recipe}({explicit!r})")
    if isinstance(explicit, list | tuple):
        if len(explicit) != 2 or not all(
            isinstance(v, int) and not isinstance(v, bool) for v in explicit
        ):
            raise ValueError(f"a key pair is two int4 integers, like [7, -2], not {explicit!r}")
        a, b = explicit
        for v in (a, b):
            if not INT4_MIN <= v <= INT4_MAX:
                raise ValueError(
                    f"{v} is outside the int4 range of a key pair ({INT4_MIN} to {INT4_MAX})"
                )
        return LockKey("int4pair", (a, b))
    raise ValueError(f"{_KEY_HELP}, not {explicit!r}")


def name_key_for(job_name: str, explicit: object) -> LockKey:
    """The MySQL lock name or lease name of a job: an explicit name, or the job name."""
    name = job_name if explicit is None else explicit
    if not isinstance(name, str):
        raise ValueError(
            f"for this strategy the key is a lock name (a string of 1-{MAX_NAME_LENGTH} "
            f"characters), not {name!r}"
        )
    problem = check_name(name)
    if problem:
        raise ValueError(problem)
    return LockKey("name", name)
