"""The output a run leaves (`lockconsole_run_output`): the tail of a command's stdout and
stderr, or a callable's exception and traceback, passwords (and the values of the environment's
secret variables) masked, at most MAX_OUTPUT characters
(the end is kept, from the start of a line, masked before it is cut). Raw driver, no
SQLAlchemy: the runner writes it with the outcome."""

from __future__ import annotations

from dataclasses import dataclass

from lockconsole.backends.ledger.store import Ledger
from lockconsole.config.urls import redact, remember_environment

MAX_OUTPUT = 64 * 1024  # characters kept of one run's output (its end)
# A command's tail is kept this much longer than MAX_OUTPUT, so it is masked before its last cut:
# a password (assumed shorter than this, and without a newline) that the first cut split sits in
# the partial first line, which is dropped; one that the last cut splits was masked already.
MASK_MARGIN = 4 * 1024


@dataclass(frozen=True)
class RunOutput:
    run_id: int
    job: str
    outcome: str
    output: str | None  # None: the run left no output


def drop_partial_line(text: str, limit: int = MASK_MARGIN) -> str:
    """`text`, whose start was cut off, without its first (partial) line; when no newline is in
    its first `limit` characters, without those: no fragment of a password the cut split stays."""
    newline = text.find("\n", 0, limit)
    return text[newline + 1 :] if newline >= 0 else text[limit:]


def masked_tail(text: str, cut: int = 0) -> str:
    """`text` (what is left after `cut` earlier bytes were cut off) with passwords masked, then
    cut to its last MAX_OUTPUT characters; each cut drops the partial line it leaves first."""
    if cut:
        kept = drop_partial_line(text)
        cut += len(text[: len(text) - len(kept)].encode())
        text = kept
    text = redact(text)
    if len(text) > MAX_OUTPUT:
        kept = drop_partial_line(text[-MAX_OUTPUT:])
        cut += len(text[: len(text) - len(kept)].encode())
        text = kept
    return f"[… {cut} earlier bytes not kept]\n{text}" if cut else text


def keep_output(ledger: Ledger, run_id: int, text: str, cut: int = 0) -> None:
    """Keep a finished run's output (masked, its tail) in the ledger's database; `cut`: how
    many earlier bytes of it were not kept (a command's tail)."""
    remember_environment()  # the job inherited our environment: its secrets are masked too
    params = {"run_id": run_id, "output": masked_tail(text, cut)}
    ledger.insert("insert_run_output", params)


def output_of(ledger: Ledger, run_id: int) -> RunOutput | None:
    """The run's job, outcome and output; None when the ledger has no such run."""
    row = ledger.fetch_one("select_run_output", {"run_id": run_id})
    if row is None:
        return None
    job, outcome, output = row
    return RunOutput(run_id, job, outcome, output)
