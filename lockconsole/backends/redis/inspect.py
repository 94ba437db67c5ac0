"""Redis lock keys: list the holders under the configured prefixes, and force-release one.

Keys are found with SCAN (never KEYS, which blocks the server) under the database's
`scan_prefixes` and every redis job's prefix; each key's value, remaining TTL and
lockconsole's fencing note are read in one pipeline per batch. A ShedLock value
(`ADDED:<ISO time>@<host>:<uuid>`) gives the holder's host and the time it was added; any
other value (say, Laravel's random lock owner) is listed as it is. Release is the same
compare-and-delete as the lock's own: the key is deleted only if it still holds exactly
the value that was listed.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from lockconsole.backends.audit import Actor, AuditLog
from lockconsole.backends.connect import Timeouts, close_quietly, first_line
from lockconsole.backends.inspect import (
    HolderList,
    ReleaseResult,
    ReleaseStatus,
    audited_release,
)
from lockconsole.backends.redis.lock import (
    RELEASE,
    TOKEN_PREFIX,
    client_for,
    decode,
    encode,
    redis_errors,
)
from lockconsole.config.urls import scrub
from lockconsole.model.errors import DatabaseError
from lockconsole.model.jobs import Database, Job
from lockconsole.model.views import Holder

BATCH = 500  # keys per SCAN step and per pipeline


def parse_shedlock_value(value: str) -> tuple[str | None, datetime | None]:
    """(host, added time) from `ADDED:<ISO time>@<host>[:<uuid>]`; (None, None) otherwise."""
    if not value.startswith("ADDED:") or "@" not in value:
        return None, None
    stamp, _, rest = value[len("ADDED:") :].partition("@")
    try:
        added: datetime | None = datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        added = None
    if added is not None:
        added = added.replace(tzinfo=UTC) if added.tzinfo is None else added.astimezone(UTC)
    host, colon, tail = rest.rpartition(":")
    if not colon or len(tail) != 36 or tail.count("-") != 4:  # no UUID (older ShedLock)
        host = rest
    return (host or None), added


class RedisInspector:
    """Lock keys of one Redis database, and a guarded compare-and-delete of one key."""

    def __init__(self, database: Database, *, timeouts: Timeouts | None = None) -> None:
        self.database, self.timeouts = database, timeouts
        self._client: Any = None

    def _redis(self) -> Any:
        if self._client is None:
            limits = {}
            if self.timeouts is not None:
                limits = {
                    "connect_timeout": self.timeouts.connect,
                    "read_timeout": self.timeouts.statement,
                }
            self._client = client_for(self.database.url, **limits)
        return self._client

    def _describe(self, exc: BaseException) -> str:
        return scrub(first_line(exc), self.database.url)

    def prefixes(self, jobs: Sequence[Job]) -> list[str]:
        """The configured scan prefixes and every redis job's prefix, without overlaps."""
        found = set(self.database.scan_prefixes)
        found.update(j.redis_prefix for j in jobs if self._ours(j))
        ordered = sorted(found)
        return [p for p in ordered if not any(p != q and p.startswith(q) for q in ordered)]

    def _ours(self, job: Job) -> bool:
        return job.strategy == "redis" and job.database == self.database.name

    def holders(self, jobs: Sequence[Job]) -> HolderList:
        """Every string key under the prefixes, with its value, TTL and fencing token."""
        mapped = {j.redis_prefix + str(j.key.value): j.name for j in jobs if self._ours(j)}
        prefixes = self.prefixes(jobs)
        source = "SCAN " + ", ".join(f"{p}*" for p in prefixes)
        holders: list[Holder] = []
        skipped = 0
        try:
            for batch in self._batches(prefixes):
                found, other = self._read(batch, mapped, source)
                holders.extend(found)
                skipped += other
        except redis_errors() as exc:
            self.close()
            raise DatabaseError(
                f"{self.database.url.masked}: listing Redis locks failed: {self._describe(exc)}"
            ) from None
        holders.sort(key=lambda h: h.key)
        notes = (
            (f"{skipped} key(s) under the prefixes are not strings: not locks",) if skipped else ()
        )
        return HolderList(tuple(holders), source, notes)

    def _batches(self, prefixes: list[str]) -> Iterator[list[bytes]]:
        seen: set[bytes] = set()
        for prefix in prefixes:
            batch: list[bytes] = []
            for key in self._redis().scan_iter(match=encode(prefix) + b"*", count=BATCH):
                if key in seen:
                    continue
                seen.add(key)
                batch.append(key)
                if len(batch) >= BATCH:
                    yield batch
                    batch = []
            if batch:
                yield batch

    def _read(
        self, keys: list[bytes], mapped: dict[str, str], source: str
    ) -> tuple[list[Holder], int]:
        """The holders of `keys` (one pipeline), and how many keys were not strings."""
        pipe = self._redis().pipeline(transaction=False)
        for raw in keys:
            pipe.get(raw)
            pipe.pttl(raw)
            pipe.get(encode(TOKEN_PREFIX) + raw)
        answers = pipe.execute(raise_on_error=False)
        now = datetime.now(UTC)
        out: list[Holder] = []
        skipped = 0
        for i, raw_key in enumerate(keys):
            value, ttl, note = answers[3 * i : 3 * i + 3]
            if isinstance(value, Exception):
                skipped += 1  # WRONGTYPE: a hash, list, ... under the prefix
                continue
            if value is None:
                continue  # expired or released since the SCAN
            key, text = decode(raw_key), decode(value)
            host, added = parse_shedlock_value(text)
            until = now + timedelta(milliseconds=ttl) if isinstance(ttl, int) and ttl >= 0 else None
            out.append(
                Holder(
                    database=self.database.name,
                    kind="redis",
                    key=key,
                    key_kind="name",
                    granted=True,
                    source=source,
                    job=mapped.get(key),
                    held_since=added,
                    state="held",
                    state_since=added,
                    lock_until=until,
                    locked_by=host,
                    fencing_token=_token(note, text),
                    value=text,
                )
            )
        return out, skipped

    def release(self, holder: Holder, *, actor: Actor, audit: AuditLog) -> ReleaseResult:
        """Delete the key only if it still holds exactly the value listed; audited first."""
        if holder.kind != "redis" or holder.database != self.database.name:
            return ReleaseResult("error", "not a Redis lock of this database", holder)
        if holder.value is None:
            return ReleaseResult("error", "no value was listed for this key", holder)
        target = f"redis key {holder.key!r} holding {holder.value!r}"
        value = holder.value
        return audited_release(
            holder,
            target,
            lambda: self._delete(holder.key, value, target),
            actor=actor,
            audit=audit,
        )

    def _delete(self, key: str, value: str, target: str) -> tuple[ReleaseStatus, str]:
        """The guarded delete (only while the key holds `value`) as (status, one-line message)."""
        try:
            done = self._redis().eval(
                RELEASE, 2, encode(key), encode(TOKEN_PREFIX + key), encode(value)
            )
        except redis_errors() as exc:
            self.close()
            return "error", f"deleting {target} failed: {self._describe(exc)}"
        if done:
            return "released", f"{target} deleted; another instance can take it now"
        return "holder_changed", (
            f"holder changed: redis key {key!r} no longer holds {value!r}; nothing was done"
        )

    def close(self) -> None:
        client, self._client = self._client, None
        close_quietly(client)


def _token(note: Any, value: str) -> int | None:
    """The fencing token of lockconsole's note, when the note is about this very value."""
    if not isinstance(note, bytes):
        return None
    token, _, noted = decode(note).partition(" ")
    return int(token) if token.isdigit() and noted == value else None
