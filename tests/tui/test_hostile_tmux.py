"""The real `lockconsole` console in a real terminal (tmux) on hostile data: after opening the
release modal on each hostile holder, the status line is still on screen, nothing cleared or
retitled the terminal, and the modal shows the holder."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hostile import World, hostile_world

from helpers import unavailable

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def world(pg_url: str, mysql_url: str, tmp_path_factory: Any) -> Iterator[World]:
    uid = uuid.uuid4().hex[:10]
    with hostile_world(pg_url, mysql_url, uid, tmp_path_factory.mktemp("hostile")) as w:
        yield w


class Tmux:
    """One private tmux server (its own socket) running one command in a 120x40 pane."""

    def __init__(self, command: list[str], env: dict[str, str]) -> None:
        self.socket = f"lc-hostile-{uuid.uuid4().hex[:8]}"
        exports = " ".join(f"{k}={_quote(v)}" for k, v in env.items())
        # no client ever attaches: size the window first (tmux may start it at 80x24), then
        # start the console in it, so it starts at 120x40
        self.tmux("-f", "/dev/null", "new-session", "-d", "-x", "120", "-y", "40", "cat")
        self.tmux("set-option", "-g", "window-size", "manual")
        self.tmux("resize-window", "-x", "120", "-y", "40")
        assert self.tmux("display", "-p", "#{pane_width}x#{pane_height}").strip() == "120x40"
        # COLUMNS and LINES (set under pytest) would win over the pane's real size
        argv = " ".join(map(_quote, command))
        self.tmux("respawn-pane", "-k", f"env -u COLUMNS -u LINES {exports} {argv}")

    def tmux(self, *args: str) -> str:
        done = subprocess.run(
            ["tmux", "-L", self.socket, *args], capture_output=True, text=True, timeout=30
        )
        return done.stdout

    def screen(self) -> list[str]:
        return self.tmux("capture-pane", "-p").splitlines()

    def keys(self, *keys: str) -> None:
        self.tmux("send-keys", *keys)

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


def status_on_top(lines: list[str]) -> bool:
    return bool(lines) and "every" in lines[0] and "│" in lines[0]


def modal_open(lines: list[str]) -> bool:
    return any("Cancel (Esc)" in line for line in lines)


def test_status_line_survives_the_release_modal_of_every_hostile_holder(world: World) -> None:
    if shutil.which("tmux") is None:
        unavailable("tmux is not installed (apt-get install tmux)")
    binary = Path(sys.executable).with_name("lockconsole")
    command = [str(binary)] if binary.exists() else [sys.executable, "-m", "lockconsole"]
    env = {"PYTHONPATH": str(ROOT), "TERM": "xterm-256color", "HOME": os.environ.get("HOME", "/")}
    term = Tmux([*command, "--config", str(world.config)], env)
    try:
        holders = len(world.pg_pids) + len(world.lease_names) + len(world.my_names)
        term.wait(
            lambda s: status_on_top(s) and any(" held " in ln for ln in s),
            "the console shows its holders",
        )
        assert max(len(line) for line in term.screen()) == 120, "the console fills the pane"
        term.keys("2")
        for step in range(holders):
            term.keys("x")
            lines = term.wait(modal_open, f"the release modal opens (holder {step})")
            size = term.tmux("display", "-p", "#{window_width}x#{window_height}").strip()
            assert status_on_top(lines), f"holder {step} ({size}): status line gone:\n" + "\n".join(
                lines
            )
            assert any("Terminate" in ln or "Expire" in ln or "Kill" in ln for ln in lines)
            assert "pwned" not in term.tmux("display", "-p", "#{pane_title}")
            term.keys("Escape")
            term.wait(lambda s: not modal_open(s), "the modal closes")
            term.keys("Down")
        assert status_on_top(term.screen())
        term.keys("q")
    finally:
        term.close()
