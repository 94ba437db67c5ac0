"""ShedLock-compatible Redis locks: one key per name, held until it expires or is released.

The key is `<prefix><name>` (ShedLock's `job-lock:<environment>:<name>`, prefix
`job-lock:default:` by default) and its value `ADDED:<ISO-8601 UTC time>@<host>:<uuid>`, as
ShedLock's Redis provider writes them, so a Java app on ShedLock and lockconsole exclude each
other on the same name:
  acquire   SET key value NX PX <max_duration ms>               (ShedLock's lockAtMostFor)
  release   compare-and-delete; while min_hold (lockAtLeastFor) has not passed since the
            acquisition, compare-and-PEXPIRE to the end of min_hold instead
  check     GET key == value (the watchdog): a key that expired, was taken over, or vanished
            with a Redis restart without persistence is a lost lock.
lockconsole's acquisition also INCRs `lockconsole:fencing:<key>` in the same Lua script. That
counter is only the floor of the fencing token: Redis forgets it with a FLUSHALL or a restart
without persistence, so the token itself is issued by the SQL ledger (`fencing.py`, through
`issue_token`, once the attempt is going to run), written back to the counter, and noted in
`lockconsole:token:<key>` = "<token> <value>" with the lock's expiry, so an inspector can tell
which token the current value holds. ShedLock ignores both keys.

Keys and values are bytes in Redis; lockconsole reads them as UTF-8 with surrogateescape, so
any byte string survives the round trip to the exact bytes a guarded release compares.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

from lockconsole.backends import LockBase
from lockconsole.backends.connect import close_quietly, first_line
from lockconsole.backends.redis import fencing
from lockconsole.config.urls import scrub
from lockconsole.model.errors import DatabaseError, MissingExtra
from lockconsole.model.jobs import Database, DatabaseURL, Job

DEFAULT_MAX_DURATION = timedelta(hours=1)
CONNECT_TIMEOUT = 10.0  # seconds
READ_TIMEOUT = 30.0  # seconds: a command that long means the connection is gone
FENCING_PREFIX = "lockconsole:fencing:"  # + the lock key: INCR counter per name
TOKEN_PREFIX = "lockconsole:token:"  # + the lock key: "<token> <value>" of the holder

# KEYS: lock, counter; ARGV: value, ms. Redis's count of acquisitions, or 0 when the key is held.
ACQUIRE = """
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
return 0
"""
# KEYS: lock, token note, counter; ARGV: value, token, ms. While the key holds our value: note
# the token and raise the counter to it; 1 then, else 0.
NOTE_TOKEN = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('SET', KEYS[2], ARGV[2] .. ' ' .. ARGV[1], 'PX', ARGV[3])
  if (tonumber(redis.call('GET', KEYS[3])) or 0) < tonumber(ARGV[2]) then
    redis.call('SET', KEYS[3], ARGV[2])
  end
  return 1
end
return 0
"""
# KEYS: lock, token note; ARGV: value. 1 when it was ours and is deleted, else 0.
RELEASE = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[2])
  return redis.call('DEL', KEYS[1])
end
return 0
"""
# KEYS: lock, token note; ARGV: value, ms. 1 when it was ours and now expires in ms, else 0.
KEEP_UNTIL = """
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('PEXPIRE', KEYS[2], ARGV[2])
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
"""


def encode(text: str) -> bytes:
    """A key or value as lockconsole holds it (str) back to Redis's exact bytes."""
    return text.encode("utf-8", "surrogateescape")


def decode(data: bytes) -> str:
    """Redis bytes as a str that encodes back to the same bytes (never raises)."""
    return data.decode("utf-8", "surrogateescape")


def shedlock_value(host: str, now: datetime | None = None) -> str:
    """ADDED:<ISO-8601 UTC time, milliseconds, Z>@<host>:<random UUID>, as ShedLock writes."""
    stamp = (now or datetime.now(UTC)).astimezone(UTC).isoformat(timespec="milliseconds")
    return f"ADDED:{stamp[:-6]}Z@{host}:{uuid.uuid4()}"


def redis_client_module() -> Any:
    """The redis-py module; MissingExtra (exit 2) naming the extra when it is not installed."""
    try:
        import redis
    except ImportError:  # depends on the installed extras (integration/test_exit_codes.py hides it)
        raise MissingExtra(
            "the redis strategy and Redis databases need the redis client: "
            "pip install 'lockconsole[redis]'"
        ) from None
    return redis


def client_for(
    url: DatabaseURL,
    *,
    connect_timeout: float = CONNECT_TIMEOUT,
    read_timeout: float = READ_TIMEOUT,
) -> Any:
    """A redis-py client for `url` (bytes in and out, every wait bounded)."""
    redis = redis_client_module()
    return redis.Redis.from_url(
        url.raw,
        socket_connect_timeout=connect_timeout,
        socket_timeout=read_timeout,
        decode_responses=False,
    )


def redis_errors() -> tuple[type[BaseException], ...]:
    import redis

    return (redis.RedisError, OSError)


class RedisLock(LockBase):
    """One job's ShedLock-format key in Redis, held until released or expired."""

    strategy = "redis"

    def __init__(self, job: Job, database: Database, *, owner: str) -> None:
        self.job, self.database, self.owner = job, database, owner
        self.name = str(job.key.value)
        self.key = job.redis_prefix + self.name
        self._keys = [
            encode(k) for k in (self.key, FENCING_PREFIX + self.key, TOKEN_PREFIX + self.key)
        ]
        self._release_keys = [self._keys[0], self._keys[2]]
        self._note_keys = [self._keys[0], self._keys[2], self._keys[1]]
        self._floor = 0  # Redis's counter at our acquisition: the least token to issue
        self.host = socket.gethostname()
        self.session_id: int | None = None
        self.fencing_token: int | None = None
        self.value: str | None = None
        self._value = b""  # the value's bytes
        self._ms = int((job.max_duration or DEFAULT_MAX_DURATION).total_seconds() * 1000)
        self.held = False
        self.lost_before_release = False  # release() found the key expired or taken over
        self._acquired_at = 0.0  # time.monotonic() when the key was set
        self._client: Any = None
        self._scripts: dict[str, Any] = {}
        self._pid = os.getpid()

    def _redis(self) -> Any:
        if self._client is None:
            self._client = client_for(self.database.url)
            scripts = {
                "acquire": ACQUIRE,
                "release": RELEASE,
                "keep": KEEP_UNTIL,
                "note": NOTE_TOKEN,
            }
            self._scripts = {k: self._client.register_script(v) for k, v in scripts.items()}
        return self._client

    def _failed(self, exc: BaseException) -> DatabaseError:
        url = self.database.url
        return DatabaseError(
            f"{url.masked}: redis lock {self.key!r}: {scrub(first_line(exc), url)}"
        )

    def acquire(self) -> bool:
        """SET NX PX max_duration (with the counter's INCR, in one script); never waits.

        The fencing token is not known yet: `issue_token` gets it from the ledger.
        """
        value = shedlock_value(self.host)
        raw = encode(value)
        if self._client is None:
            self._redis()
        try:
            counted = int(self._scripts["acquire"](keys=self._keys[:2], args=[raw, self._ms]))
        except redis_errors() as exc:
            self._drop()
            raise self._failed(exc) from None
        if not counted:
            return False
        self.held, self.value, self._value, self.fencing_token = True, value, raw, None
        self.lost_before_release, self._acquired_at = False, time.monotonic()
        self._floor = counted
        return True

    def issue_token(self, ledger: fencing.TokenIssuer) -> int:
        """The held lock's fencing token, issued by `ledger` (above every earlier one), noted.

        A ledger that cannot issue it raises (DatabaseError); the key stays held for the caller
        to release. A failed note only leaves `locks` without the token: the watchdog decides
        whether the key is still ours.
        """
        if not self.held or self.value is None:
            raise ValueError(f"redis lock {self.key!r} is not held: it has no token to issue")
        token = fencing.issue(ledger, self.key, self._floor)
        self.fencing_token = token
        try:
            self._scripts_run("note", [self._value, token, self._ms], self._note_keys)
        except redis_errors():
            self._drop()
        return token

    def still_held(self) -> bool:
        """True while the key still holds our value; never raises (an error twice: False)."""
        if not self.held or self.value is None:
            return False
        for attempt in (1, 2):
            try:
                return self._redis().get(self._keys[0]) == self._value
            except redis_errors():
                self._drop()
                if attempt == 2:
                    return False
        return False

    def release(self) -> None:
        """ShedLock's unlock: compare-and-delete, or keep the key until min_hold has passed."""
        if not self.held or self.value is None:
            return
        self.held = False
        ms = 0
        if self.job.min_hold:
            held = time.monotonic() - self._acquired_at
            ms = int((self.job.min_hold.total_seconds() - held) * 1000)
        for attempt in (1, 2):  # a dropped connection is reopened once; both are idempotent
            try:
                if ms > 0:
                    done = self._scripts_run("keep", [self._value, ms])
                else:
                    done = self._scripts_run("release", [self._value])
            except redis_errors() as exc:
                self._drop()
                if attempt == 2:
                    raise self._failed(exc) from None
            else:
                self.lost_before_release = not done
                return

    def _scripts_run(self, name: str, args: list[Any], keys: list[bytes] | None = None) -> int:
        if self._client is None:
            self._redis()
        return int(self._scripts[name](keys=keys or self._release_keys, args=args))

    def reusable(self) -> bool:
        """Released cleanly (the key was still ours): fit for another attempt."""
        return not (self.held or self.lost_before_release) and self._pid == os.getpid()

    def _drop(self) -> None:
        client, self._client = self._client, None
        close_quietly(client)

    def close(self) -> None:
        """Close the client's connections (the key stays until released or expired)."""
        self._drop()
