"""The ledger's texts: a run's message as it is kept, and what a refused statement lacks."""

from __future__ import annotations

from lockconsole.config.urls import redact

MAX_MESSAGE = 4096  # characters kept of a run's message; longer ones keep head and tail


def truncate(message: str | None) -> str | None:
    """The message, passwords masked, cut to MAX_MESSAGE characters (keeping start and end)."""
    if message is None:
        return message
    masked = redact(message)
    if masked != message:
        message = masked
    if len(message) <= MAX_MESSAGE:
        return message
    head, tail = MAX_MESSAGE // 4, MAX_MESSAGE * 3 // 4
    cut = len(message) - head - tail
    return f"{message[:head]}\n… [{cut} characters truncated] …\n{message[-tail:]}"


def grant_hint(query: str, runs_table: str) -> str:
    """What a role refused by `query` lacks, for the one line an operator reads."""
    table = {
        "select_control": "lockconsole_controls",
        "insert_run_output": "lockconsole_run_output",
    }
    verb = "SELECT" if query.startswith("select") else "INSERT" if "insert" in query else "UPDATE"
    if "request" in query:  # run requests: queued by who steers, taken and updated by servers
        return (
            f" (run requests need {verb} on lockconsole_requests: "
            f"GRANT {verb} ON lockconsole_requests ...)"
        )
    if query == "issue_fencing_token":  # a Redis lock's token: an upsert on its row
        grant = "GRANT SELECT, INSERT, UPDATE ON lockconsole_fencing ..."
        return f" (the ledger issues Redis fencing tokens in lockconsole_fencing: {grant})"
    if query in table:
        return f" (the ledger needs {verb} on {table[query]}: GRANT {verb} ON {table[query]} ...)"
    grant = f"GRANT SELECT, INSERT, UPDATE ON {runs_table} ..."
    return f" (the ledger needs {verb} on {runs_table}: {grant})"
