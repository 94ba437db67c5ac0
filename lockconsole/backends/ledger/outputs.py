"""The output a run leaves (`lockconsole_run_output`): the tail of a command's stdout and
stderr, or a callable's exception and traceback, passwords masked, at most MAX_OUTPUT characters
(the end is kept). Raw driver, no SQLAlchemy: the runner writes it with the outcome."""

from __future__ import annotations

from dataclasses import dataclass

from lockconsole.backends.ledger.store import Ledger
from lockconsole.config.urls import redact

MAX_OUTPUT = 64 * 1024  # characters kept of one run's output (its end)
NOTE_ROOM = 64  # beyond MAX_OUTPUT: the "[… N earlier bytes not kept]" a command's tail starts with


@dataclass(frozen=True)
class RunOutput:
    run_id: int
    job: str
    outcome: str
    output: str | None  # None: the run left no output


def masked_tail(text: str) -> str:
    """`text` with passwords masked, cut to its last MAX_OUTPUT characters."""
    text = redact(text)
    if len(text) <= MAX_OUTPUT + NOTE_ROOM:
        return text
    cut = len(text) - MAX_OUTPUT
    return f"[… {cut} earlier characters not kept]\n{text[-MAX_OUTPUT:]}"


def keep_output(ledger: Ledger, run_id: int, text: str) -> None:
    """Keep a finished run's output (masked, its tail) in the ledger's database."""
    params = {"run_id": run_id, "output": masked_tail(text)}
    ledger.insert("insert_run_output", params)


def output_of(ledger: Ledger, run_id: int) -> RunOutput | None:
    """The run's job, outcome and output; None when the ledger has no such run."""
    row = ledger.fetch_one("select_run_output", {"run_id": run_id})
    if row is None:
        return None
    job, outcome, output = row
    return RunOutput(run_id, job, outcome, output)
