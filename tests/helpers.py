"""Helpers every test module shares: polling with generous deadlines, Pilot settling, configs.

Deadlines here are upper bounds for a condition to come true on a loaded machine, never a
measurement: a test that passes waits only as long as the condition takes.
"""

from __future__ import annotations

import asyncio
import functools
import os
import time
from collections.abc import Callable
from typing import Any, NoReturn

import pytest

CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
DEADLINE = 30.0  # seconds: generous, so a busy 2-core machine never fails a correct test


def unavailable(reason: str) -> NoReturn:
    """A prerequisite (a client, a TCP server, a plugin) is missing: skip, or fail under CI=true."""
    if CI:
        pytest.fail(f"{reason} (CI=true: a missing prerequisite fails the run)")
    pytest.skip(reason)


def wait_for(
    predicate: Callable[[], Any],
    timeout: float = DEADLINE,
    what: str = "condition",
    interval: float = 0.05,
) -> Any:
    """Poll `predicate` until it returns something truthy and return that; fail after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        time.sleep(interval)


def eventually(check: Callable[[], Any], timeout: float = DEADLINE, interval: float = 0.05) -> Any:
    """Poll `check` until truthy; that value, or the last falsy one on timeout (caller asserts)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value or time.monotonic() > deadline:
            return value
        time.sleep(interval)


def sync(test: Callable[..., Any]) -> Callable[..., Any]:
    """Run an async test function with asyncio.run (no plugin needed)."""

    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> None:
        asyncio.run(test(*args, **kwargs))

    return run


async def settle(app: Any, pilot: Any, *, expect_failure: bool = False) -> None:
    """Wait for the console's first refresh to have started (it is not a worker yet right after
    the app starts), then for every worker of `app`, then for the screen to update.

    A worker that fails is a test failure (WorkerFailed propagates) unless the test says it
    expects one (`expect_failure=True`), and then one must have failed.
    """
    from textual.worker import WorkerFailed

    if hasattr(app, "refresh_started"):  # the console: its first refresh follows its first frame
        await until(
            pilot,
            lambda: app.refresh_started is not None or app.snapshot is not None or app.errors,
            what="the console's first refresh to start",
        )
    try:
        await app.workers.wait_for_complete()
    except WorkerFailed:
        if not expect_failure:
            raise
    else:
        if expect_failure:
            raise AssertionError("a worker was expected to fail, and none did")
    await pilot.pause()


async def until(
    pilot: Any, check: Callable[[], Any], timeout: float = DEADLINE, what: str = "condition"
) -> Any:
    """Poll `check()` while the app runs (Pilot pauses) until truthy; fail after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout:g}s waiting for {what}")
        await pilot.pause(0.05)


def config_for(url: str, job: str, strategy: str = "pg-session", extra: str = "") -> Any:
    """A parsed config with one database `main` and one job on it (cron 02:00, fast watchdog)."""
    from lockconsole.config.loader import parse_config

    return parse_config(
        f'[databases.main]\nurl = "{url}"\n[jobs.{job}]\nstrategy = "{strategy}"\n'
        f'schedule = "0 2 * * *"\nwatchdog_interval = 0.2\n{extra}'
    )
