"""Python's garbage collector and a fleet's snapshots (no Textual).

Each refresh brings a new snapshot: for 200 jobs over a 3-hour lookback, 36,000 slot reports and
their tuples, every one an object the cyclic collector tracks. Left alone, a full collection
falls due every few refreshes and walks every object alive, a pause of a few hundred
milliseconds on a loaded machine, on whichever thread allocates when it falls due (often the
UI's). A snapshot holds no reference cycles: its objects are freed by their reference counts
when the next one replaces it, so the collector has nothing to find in them.

`Collector.settle()`, called by the refresh worker once a snapshot and its panes are built,
moves every object alive into the collector's permanent generation (`gc.freeze()`, constant
time): full collections then walk only what was made since. An object frozen this way that
later becomes part of an unreachable cycle (a closed screen, say) is not collected while frozen,
so every `UNFREEZE_EVERY` seconds `settle()` gives them all back instead (`gc.unfreeze()`):
the next full collection walks everything once and frees what died meanwhile. `release()`
gives them back for good (the app's exit).
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable

UNFREEZE_EVERY = 600.0  # seconds between the walks over everything


class Collector:
    """When to freeze the objects alive and when to give them back to the collector."""

    def __init__(
        self, *, every: float = UNFREEZE_EVERY, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.every = every
        self.clock = clock
        self._lock = threading.Lock()
        self._frozen_since: float | None = None
        self.released = False

    def settle(self) -> None:
        """A snapshot and its panes are built: leave what is alive out of full collections,
        or, once every `every` seconds, give everything back to be walked once."""
        with self._lock:
            if self.released:
                return
            now = self.clock()
            if self._frozen_since is not None and now - self._frozen_since >= self.every:
                gc.unfreeze()
                self._frozen_since = None
                return
            gc.freeze()
            if self._frozen_since is None:
                self._frozen_since = now

    def release(self) -> None:
        """Give every frozen object back to the collector, and freeze no more."""
        with self._lock:
            self.released = True
            self._frozen_since = None
            gc.unfreeze()
