"""The console on real servers and in tmux: the Textual app under Pilot against the test
PostgreSQL and MariaDB, and `lockconsole console` in a tmux pane. The console on the sample data
(no server) is tested in tests/unit/tui."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from typing import Any

import pytest

from lockconsole.config.loader import Config
from lockconsole.console.facade import Console


@pytest.fixture
def make_console() -> Iterator[Callable[..., Console]]:
    """make(config, **kwargs): a Console over the configuration, closed after the test."""
    made: list[Console] = []

    def make(config: Config, **kwargs: Any) -> Console:
        made.append(Console(config, **kwargs))
        return made[-1]

    yield make
    for console in made:
        console.close()


@pytest.fixture
def shifted() -> Iterator[list[timedelta]]:
    """A clock offset the test moves (shifted[0]) to show the console data from the past."""
    yield [timedelta(0)]
