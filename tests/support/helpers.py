"""Helpers every test module shares: polling with generous deadlines, Pilot settling, configs.

Deadlines here are upper bounds for a condition to come true on a loaded machine, never a
measurement: a test that passes waits only as long as the condition takes.
"""

from __future__ import annotations

import asyncio
import functools
import os
import shutil
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
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


def mysql_connect(url: str, **options: Any) -> Any:
    """A PyMySQL connection to the server and database of a mysql:// URL; autocommit unless
    `options` say otherwise (they are PyMySQL's connect arguments)."""
    import pymysql

    from lockconsole.config.urls import parse_url

    u = parse_url(url)
    options.setdefault("autocommit", True)
    return pymysql.connect(
        host=u.host,
        port=u.port or 3306,
        user=u.user,
        password=u.password or "",
        database=u.database,
        **options,
    )


def config_for(url: str, job: str, strategy: str = "pg-session", extra: str = "") -> Any:
    """A parsed config with one database `main` and one job on it (cron 02:00, fast watchdog)."""
    from lockconsole.config.loader import parse_config

    return parse_config(
        f'[databases.main]\nurl = "{url}"\n[jobs.{job}]\nstrategy = "{strategy}"\n'
        f'schedule = "0 2 * * *"\nwatchdog_interval = 0.2\n{extra}'
    )


class Tmux:
    """One private tmux server (its own socket) running one command in a WIDTHxHEIGHT pane."""

    def __init__(
        self, command: list[str], env: dict[str, str], width: int = 120, height: int = 40
    ) -> None:
        import uuid

        self.socket = f"lc-test-{uuid.uuid4().hex[:8]}"
        exports = " ".join(f"{k}={_quote(v)}" for k, v in env.items())
        # no client ever attaches: size the window first (tmux may start it at 80x24), then
        # start the command in it, so it starts at its size
        self.tmux(
            "-f", "/dev/null", "new-session", "-d", "-x", str(width), "-y", str(height), "cat"
        )
        self.tmux("set-option", "-g", "window-size", "manual")
        self.tmux("resize-window", "-x", str(width), "-y", str(height))
        size = self.tmux("display", "-p", "#{pane_width}x#{pane_height}").strip()
        assert size == f"{width}x{height}", size
        # COLUMNS and LINES (set under pytest) would win over the pane's real size
        argv = " ".join(map(_quote, command))
        self.tmux("respawn-pane", "-k", f"env -u COLUMNS -u LINES {exports} {argv}")

    def tmux(self, *args: str) -> str:
        import subprocess

        done = subprocess.run(
            ["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=30
        )
        return done.stdout

    def screen(self) -> list[str]:
        return self.tmux("capture-pane", "-p").splitlines()

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", *keys)

    def type(self, text: str) -> None:
        """Type `text` literally (no key names)."""
        self.tmux("send-keys", "-l", text)

    def wait(self, what: Callable[[list[str]], bool], why: str, deadline: float = 60) -> list[str]:
        """Poll the screen until `what` holds (a generous deadline, not a timing claim)."""
        end = time.monotonic() + deadline
        while time.monotonic() < end:
            lines = self.screen()
            if what(lines):
                return lines
            time.sleep(0.1)
        raise AssertionError(f"{why}; the screen:\n" + "\n".join(self.screen()))

    def close(self) -> None:
        self.tmux("kill-server")


def _quote(text: str) -> str:
    return "'" + text.replace("'", "'\\''") + "'"


class Terminal:
    """One tmux server of our own (its own socket), one 80x24 window running a command."""

    def __init__(self, socket: str, folder: Path, size: tuple[int, int] = (80, 24)) -> None:
        self.tmux = shutil.which("tmux") or unavailable(
            "tmux is not installed (apt-get install tmux)"
        )
        self.socket, self.folder, self.size = socket, folder, size

    def _run(self, *args: str) -> str:
        done = subprocess.run(
            [self.tmux, "-L", self.socket, *args],
            capture_output=True,
            text=True,
            timeout=30,
            check=True,
        )
        return done.stdout

    def start(self, argv: list[str], env: dict[str, str]) -> None:
        status = self.folder / "exit_status"
        status.unlink(missing_ok=True)
        line = " ".join(f"'{a}'" for a in argv) + f"; echo $? > '{status}'; sleep 600"
        exports = [x for k, v in env.items() for x in ("-e", f"{k}={v}")]
        width, height = (str(n) for n in self.size)
        self._run("new-session", "-d", "-x", width, "-y", height, "-s", "lc", *exports, line)

    def screen(self) -> str:
        return self._run("capture-pane", "-p", "-t", "lc")

    def press(self, *keys: str) -> None:
        self._run("send-keys", "-t", "lc", *keys)

    def wait_screen(self, check, what: str, timeout: float = DEADLINE) -> str:
        seen = [""]

        def look() -> str | None:
            seen[0] = self.screen()
            return seen[0] if check(seen[0]) else None

        try:
            return wait_for(look, what=what, interval=0.2, timeout=timeout)
        except AssertionError as exc:
            raise AssertionError(f"{exc}; the screen:\n{seen[0]}") from None

    def exit_status(self) -> int:
        path = self.folder / "exit_status"
        wait_for(lambda: path.exists() and path.read_text().strip(), what="the console to exit")
        return int(path.read_text().strip())

    def close(self) -> None:
        subprocess.run(
            [self.tmux, "-L", self.socket, "kill-server"], capture_output=True, timeout=30
        )


async def first_data(app: Any, pilot: Any) -> None:
    """Wait for the console's first snapshot to be on screen (its refresh starts only after the
    first frame, so waiting for the workers alone may come too early on a busy machine)."""
    await until(pilot, lambda: app.snapshot is not None, what="the first snapshot")
    await settle(app, pilot)
