"""The real `lockconsole` console in a real terminal (tmux) on hostile data: after opening the
release modal on each hostile holder, the status line is still on screen, nothing cleared or
retitled the terminal, and the modal shows the holder."""

from __future__ import annotations

import os
import shutil
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.helpers import Tmux, unavailable
from tests.support.hostile import World, hostile_world
from tests.support.settings import ROOT


@pytest.fixture(scope="module")
def world(pg_url: str, mysql_url: str, tmp_path_factory: Any) -> Iterator[World]:
    uid = uuid.uuid4().hex[:10]
    with hostile_world(pg_url, mysql_url, uid, tmp_path_factory.mktemp("hostile")) as w:
        yield w


def status_on_top(lines: list[str]) -> bool:
    """The header (row 0) and the status line under it (row 1) are on screen."""
    return len(lines) > 1 and "config " in lines[0] and "every" in lines[1] and "│" in lines[1]


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
            # Rows come as blocks of one kind (PG sessions, leases, GET_LOCK names), one row per
            # corpus string in each: a modal on every third row, shifted by the block, opens one
            # per string and spreads them over the three kinds.
            per_kind = holders // 3
            if (step % per_kind) % 3 != (step // per_kind) % 3:
                term.keys("Down")
                continue
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
