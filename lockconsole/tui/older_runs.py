"""The history pane past the rows a snapshot loads: its filter's field words, and older runs read
from the ledger a page at a time when asked ("m"), for the filter in force.

    wanted = parse_filter("job:nightly_billing outcome:failed web-2")
    wanted.keeps(run)            # job and outcome exactly, "web-2" anywhere in the row
    older.load(facade, wanted, before=oldest_shown)   # in a worker thread: one page further back
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING

from lockconsole.model.jobs import Run
from lockconsole.model.views import RunFilter

if TYPE_CHECKING:
    from lockconsole.console.protocol import ConsoleFacade

PAGE = 200  # runs read per "m"
FIELDS = ("job", "instance", "outcome")


@dataclass(frozen=True)
class HistoryFilter:
    """The filter box read as field words (`job:`, `instance:`, `outcome:`, exact) and the
    rest (free text, matched anywhere in a row, case-insensitive)."""

    job: str | None = None
    instance: str | None = None
    outcome: str | None = None
    text: str = ""

    def keeps(self, run: Run) -> bool:
        """True when the run matches every field word (the free text is the pane's)."""
        return all(
            wanted is None or getattr(run, name) == wanted
            for name, wanted in (("job", self.job), ("instance", self.instance),
                                 ("outcome", self.outcome))
        )  # fmt: skip

    def keeps_missed(self, job: str) -> bool:
        """True when a missed slot of `job` (no run at all) matches the field words."""
        return (
            (self.job in (None, job))
            and self.instance is None
            and self.outcome
            in (
                None,
                "missed",
            )
        )

    @property
    def holder_text(self) -> str:
        """What the holders pane matches: the job or instance word, else the free text."""
        return self.job or self.instance or self.text

    @property
    def fields(self) -> tuple[str | None, str | None, str | None]:
        return self.job, self.instance, self.outcome


def parse_filter(text: str) -> HistoryFilter:
    """`job:a instance:b outcome:c` words and free text; an unknown `x:` word is free text."""
    found: dict[str, str] = {}
    rest: list[str] = []
    for word in text.split():
        name, colon, value = word.partition(":")
        if colon and name.lower() in FIELDS and value:
            found[name.lower()] = value
        else:
            rest.append(word)
    return HistoryFilter(**found, text=" ".join(rest))


class OlderRuns:
    """Runs older than a snapshot's page, loaded on demand for one filter's field words (a
    change of them starts over)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._fields: tuple[str | None, str | None, str | None] = (None, None, None)
        self._runs: list[Run] = []
        self.exhausted = False  # the last page came back short: nothing older

    def runs(self, wanted: HistoryFilter) -> list[Run]:
        """The older runs loaded for these field words (none for other words)."""
        with self._lock:
            return list(self._runs) if wanted.fields == self._fields else []

    def load(self, facade: ConsoleFacade, wanted: HistoryFilter, before: datetime) -> list[Run]:
        """Read one page of runs that started before `before`, for `wanted`'s field words, and
        keep them; the page read. Runs in a worker thread (it reads the ledgers)."""
        where = RunFilter(instance=wanted.instance, outcome=wanted.outcome, until=before)
        page: list[Run] = facade.history(wanted.job, limit=PAGE, where=where)
        with self._lock:
            if wanted.fields != self._fields:
                self._fields, self._runs = wanted.fields, []
            known = {(r.id, r.job, r.instance, r.started_at) for r in self._runs}
            self._runs += [r for r in page if (r.id, r.job, r.instance, r.started_at) not in known]
            self.exhausted = len(page) < PAGE
        return page
