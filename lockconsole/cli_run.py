"""`lockconsole run` and `lockconsole schedule` (filled in by the runner work)."""

from __future__ import annotations

import argparse


def add_parsers(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    pass


def dispatch(args: argparse.Namespace) -> int:
    raise NotImplementedError
