"""The soak's hung peers: some instances reach PostgreSQL through a TCP peer of the test's own
(tests/support/tcp_proxy.py) that the soak's fault injector can hang while the instance holds
the lock.

A hang keeps every connection of that instance open, takes its bytes and forwards nothing
either way (a hung sidecar, pooler or NAT box); half of the hangs also end the holder's session
on the server (pg_terminate_backend), so another instance may take the lock meanwhile. After a
while the injector resumes the peer: what was held back is forwarded, a connection the instance
gave up on is closed through to the server, and the instance goes on with its next slots.

Afterwards each hang is matched with the hung instance's attempt that was running at that
instant (the ledger's times and the injector's are both the server's clock) and counted by
what that attempt recorded.
"""

from __future__ import annotations

import random
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from urllib.parse import urlsplit, urlunsplit

from lockconsole.model.jobs import Run

from tests.support.tcp_proxy import SwitchableProxy


def through(url: str, port: int) -> str:
    """`url` with its host and port replaced by the local peer's."""
    parts = urlsplit(url)
    netloc = parts.netloc.rsplit("@", 1)
    host = f"127.0.0.1:{port}"
    return urlunsplit(parts._replace(netloc=f"{netloc[0]}@{host}" if len(netloc) == 2 else host))


@dataclass
class Hang:
    """One hang the injector placed: on whom, when (the server's time at which that instance
    was seen holding the lock, just before its peer hung), and whether the holder's session
    was also ended on the server."""

    instance: str
    at: datetime
    terminated: datetime | None  # when the server ended the holder's session (its clock)
    resumed_after: float  # seconds the peer stayed hung


@dataclass
class HungPeers:
    """One hangable peer per instance named; the hangs placed on them, and those to resume."""

    url: str
    names: tuple[str, ...]
    rng: random.Random
    hold: tuple[float, float]  # how long a hang lasts: uniform between these, seconds
    proxies: dict[str, SwitchableProxy] = field(default_factory=dict)
    hangs: list[Hang] = field(default_factory=list)
    _resume_at: dict[str, float] = field(default_factory=dict)  # monotonic, per hung instance

    def __post_init__(self) -> None:
        parts = urlsplit(self.url)
        for name in self.names:
            self.proxies[name] = SwitchableProxy(
                (parts.hostname or "127.0.0.1", parts.port or 5432)
            )

    def url_of(self, name: str) -> str:
        return through(self.url, self.proxies[name].port)

    def free(self) -> set[str]:
        """The instances whose peer is not hung right now."""
        return set(self.names) - set(self._resume_at)

    def hang(self, name: str, pid: int, at: datetime, pg_conn, now: float) -> Hang:
        """Hang `name`'s peer, seen holding the lock at `at` with its session `pid`; maybe end
        that session too."""
        self.proxies[name].stall()
        terminated = None
        if self.rng.random() < 0.5:
            ended = "select pg_terminate_backend(%s), clock_timestamp()"
            terminated = pg_conn.execute(ended, (pid,)).fetchone()[1]
        hold = self.rng.uniform(*self.hold)
        self._resume_at[name] = now + hold
        hang = Hang(name, at, terminated, hold)
        self.hangs.append(hang)
        return hang

    def resume_due(self, now: float) -> None:
        for name, due in list(self._resume_at.items()):
            if due <= now:
                self.proxies[name].resume()
                del self._resume_at[name]

    def next_resume(self) -> float | None:
        return min(self._resume_at.values(), default=None)

    def resume_all(self) -> None:
        for name in list(self._resume_at):
            self.proxies[name].resume()
        self._resume_at.clear()

    def close(self) -> None:
        for proxy in self.proxies.values():
            proxy.close()


SLACK = timedelta(milliseconds=100)  # an attempt's ledger times are the server's, as its
# runner estimated them from the offset it measured when it connected


def hung_attempt(hang: Hang, runs: list[Run]) -> Run | None:
    """The hung instance's attempt that held the lock at the instant of the hang, if any."""
    best: tuple[timedelta, Run] | None = None
    for run in runs:
        if run.instance != hang.instance or run.outcome == "skipped" or run.started_at is None:
            continue
        if run.started_at - SLACK <= hang.at and (
            run.finished_at is None or run.finished_at + SLACK >= hang.at
        ):
            distance = abs(run.started_at - hang.at)
            if best is None or distance < best[0]:
                best = (distance, run)
    return None if best is None else best[1]


def killed(run: Run, runs: list[Run]) -> bool:
    """The runner of `run` was killed (or died) after it: its instance's next attempt came
    from another process."""
    later = [r for r in runs if r.instance == run.instance and (r.id or 0) > (run.id or 0)]
    return bool(later) and later[0].pid != run.pid


def what_happened(hang: Hang, run: Run | None, runs: list[Run]) -> str:
    """What the hung attempt's row says: "lock lost" (recorded by the instance itself, with
    its real end), "lock lost, closed by another" (another instance or the check closed it as
    abandoned and the instance then added its real end), "unknown end" (closed, no end known),
    the outcome it recorded otherwise, or "no attempt found" (none of its rows spans the
    instant). An unknown end says whether its runner was killed meanwhile. A success after a
    termination is told apart: its finish ran on the server before the session was ended (the
    hang met the finish's statement on its way), or it is a success nobody could vouch for."""
    if run is None:
        return "no attempt found"
    if run.outcome == "succeeded" and hang.terminated is not None:
        before = run.finished_at is not None and run.finished_at <= hang.terminated + SLACK
        return "succeeded, finished before its session ended" if before else "SUCCEEDED UNSEEN"
    if run.outcome != "lock_lost":
        return run.outcome
    if run.finished_at is None:
        return "unknown end, runner killed" if killed(run, runs) else "unknown end"
    return "lock lost, closed by another" if "abandoned" in (run.message or "") else "lock lost"


def hang_lines(hangs: list[Hang], runs: list[Run]) -> list[str]:
    """One line per hang: on whom, for how long, and what its attempt's row says."""
    lines = []
    for hang in hangs:
        run = hung_attempt(hang, runs)
        took = (
            f"{(run.finished_at - hang.at).total_seconds() * 1000:.0f} ms after"
            if run is not None and run.finished_at is not None
            else "-"
        )
        lines.append(
            f"  {hang.at:%H:%M:%S.%f} {hang.instance} hung {hang.resumed_after:.2f} s, "
            f"session {'left alive' if hang.terminated is None else 'terminated'}: "
            f"{what_happened(hang, run, runs)}"
            + (f" (run {run.id}, ended {took}: {run.message or ''})" if run is not None else "")
        )
    return lines


def hang_summary(hangs: list[Hang], runs: list[Run]) -> tuple[Counter[str], float]:
    """Each hang's result counted, and the longest time from a hang to its attempt's recorded
    end (seconds) among those that ended lock_lost."""
    results: Counter[str] = Counter()
    longest = 0.0
    for hang in hangs:
        run = hung_attempt(hang, runs)
        result = what_happened(hang, run, runs)
        results[result] += 1
        results["left alive" if hang.terminated is None else "terminated"] += 1
        if run is not None and result.startswith("lock lost") and run.finished_at is not None:
            longest = max(longest, (run.finished_at - hang.at).total_seconds())
    return results, longest
