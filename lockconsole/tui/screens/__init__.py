"""The console's screens. The dashboard (lockconsole.tui.screens.dashboard.screen) is the app's
default screen; the detail screens are pushed over it:

    DuplicatesScreen(console, job)               duplicate keys of the idempotency table
    TimelineScreen(snapshot, job, now=...)        every attempt per slot, one lane per instance
    RunDetailScreen(run, slot_runs)               one run in full (modal)
    HolderScreen(holder, blocks) / JobScreen(...) describe one holder / one job (describe.py)
    HelpScreen([(key, description), ...])         every key (modal)

The modals that confirm an action live in lockconsole.tui.screens.confirm.
"""

from lockconsole.tui.screens.duplicates import DuplicatesScreen
from lockconsole.tui.screens.help import HelpScreen
from lockconsole.tui.screens.run_detail import RunDetailScreen
from lockconsole.tui.screens.timeline import TimelineScreen

__all__ = ["DuplicatesScreen", "HelpScreen", "RunDetailScreen", "TimelineScreen"]
