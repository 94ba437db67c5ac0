"""The console's sweep of abandoned attempts against an attempt that finishes between the
sweep's read and its write, with real `lockconsole run` and `lockconsole check` processes.

The runner's lease runs out after its job ended and nobody takes it over, so its attempt is
still "acquired" while its lock is free: the sweep reads it so, finds the lock free afresh,
and closes it. Meanwhile the runner records its own outcome (lock_lost, with its real end and
its job's exit code). The instant is placed by the server, not by a sleep: another session
locks the attempt's ledger row, the runner's outcome write waits for it first, and the
sweep's close queues behind that write. Once the row is let go the runner's write lands first,
and the sweep's close must find the row no longer "acquired" and leave it as it was written.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import pytest

from tests.faults.fault_helpers import acquired_run, finish, job_config, runs_of, wait_for
from tests.faults.row_locks import (
    MY_POLL,
    my_query,
    my_row_locked,
    my_writes_waiting,
    pg_row_locked,
    pg_writes_waiting,
)
from tests.support.barrier import Barrier
from tests.support.helpers import mysql_connect
from tests.support.runner_helpers import lockconsole

SLOT = "2030-01-01T03:00:00+00:00"
BEFORE_CHECK = "finish_before_check"  # the job ended; the lock is not checked yet


def _ledger(
    request: pytest.FixtureRequest, kind: str, table: str
) -> tuple[
    str, Callable[[], None], Callable[[int], AbstractContextManager[None]], Callable[[], int], float
]:
    """(URL of a database of the test's own, which holds the lease and the ledger; how to let
    web-1's lease run out now; the run's row locked; the ledger writes that wait; their poll)."""
    if kind == "postgresql":
        import psycopg

        url = str(request.getfixturevalue("own_database"))
        conn: Any = psycopg.connect(url, autocommit=True)
        request.addfinalizer(conn.close)

        def expire() -> None:
            conn.execute(f"UPDATE {table} SET lock_until = locked_at WHERE locked_by = 'web-1'")

        waiting = functools.partial(pg_writes_waiting, conn)
        return url, expire, functools.partial(pg_row_locked, url), waiting, 0.05
    url = str(request.getfixturevalue("fresh_mysql"))
    conn = mysql_connect(url)
    request.addfinalizer(conn.close)

    def expire_my() -> None:
        my_query(conn, f"UPDATE {table} SET lock_until = locked_at WHERE locked_by = 'web-1'")

    waiting = functools.partial(my_writes_waiting, conn)
    return url, expire_my, functools.partial(my_row_locked, url), waiting, MY_POLL


@pytest.mark.parametrize("kind", ["postgresql", "mariadb"])
def test_the_sweep_never_overwrites_a_run_that_finished_after_its_read(
    request: pytest.FixtureRequest,
    kind: str,
    uid: str,
    tmp_path: Path,
    cli_env: dict[str, str],
    pg_url: str,
) -> None:
    table, job = f"lease_{uid}", f"sw_{uid}"
    url, expire, row_locked, writes_waiting, poll = _ledger(request, kind, table)
    # a long watchdog interval: the runner meets the lost lease at its final check
    config = job_config(
        tmp_path / "lockconsole.toml", url, job, "lease", lease_table=table, watchdog_interval=30.0
    )
    barrier = Barrier(tmp_path / "barrier", BEFORE_CHECK)
    argv = ["run", job, "--instance", "web-1", "--slot", SLOT, "--json", "--", "true"]
    runner = lockconsole(config, *argv, env=barrier.env(cli_env))
    barrier.wait(BEFORE_CHECK)
    run = wait_for(lambda: acquired_run(config, job), what="the acquired attempt")
    expire()  # the lock is free now, and the attempt still "acquired"
    with row_locked(run.id):
        barrier.release(BEFORE_CHECK)
        wait_for(lambda: writes_waiting() >= 1, what="the runner's outcome waiting", interval=poll)
        check = lockconsole(config, "check", "--no-duplicates", "-o", "tsv", env=cli_env)
        wait_for(
            lambda: writes_waiting() >= 2 or check.poll() is not None,
            what="the sweep's close queued behind the runner's write",
            interval=poll,
        )
        assert check.poll() is None, check.communicate()  # it read "acquired", found it free
    code, out, err = finish(runner, timeout=120)
    assert (code, out.get("outcome")) == (4, "lock_lost"), (code, out, err)
    swept, problems = check.communicate(timeout=120)
    assert "closed as lock_lost" not in swept, (swept, problems)
    [done] = runs_of(config, job)
    # as the runner wrote it: its real end, its job's exit code, its own words
    assert done.outcome == "lock_lost", done
    assert done.finished_at is not None, f"the sweep erased the run's end: {done}"
    assert done.exit_code == 0, done
    assert "abandoned" not in (done.message or ""), f"the sweep overwrote the run: {done}"
