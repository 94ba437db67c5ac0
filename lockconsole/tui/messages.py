"""Immutable messages that thread workers post to the app (named for what happened)."""

from __future__ import annotations

from dataclasses import dataclass

from textual.message import Message

from lockconsole.backends.inspect import ReleaseResult
from lockconsole.model.jobs import Run
from lockconsole.model.views import Snapshot
from lockconsole.tui.pane_models import Panes


@dataclass
class SnapshotLoaded(Message):
    """A refresh finished: the snapshot (merged with the last good data of failed databases),
    its panes laid out off the UI thread, and how long the database work took."""

    snapshot: Snapshot
    panes: Panes
    took: float


@dataclass
class HolderReleased(Message):
    result: ReleaseResult


@dataclass
class JobTriggered(Message):
    run: Run
