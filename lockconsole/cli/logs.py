"""How `run` and `schedule` log to stderr: one formatter, three formats, systemd's journal.

- `text` (the default): `2026-11-29 02:00:00,412 INFO lockconsole.engine.attempt event=...`
- `logfmt`: `time=2026-11-29T02:00:00.412Z level=info logger=... event=acquired job=...`
- `json`: one object per line, the attempt's fields as keys (`event`, `job`, `slot`, ...)

Under systemd (`$JOURNAL_STREAM` names our stderr) a line carries no timestamp of its own (the
journal stamps it) and starts with its syslog priority (`<6>` info, `<4>` warning, `<3>` error),
which journald reads as the entry's priority. Data in a line is escaped: no control character a
database, a note or a job put in a value reaches the terminal or the journal raw.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from datetime import UTC, datetime
from typing import IO, Any

from lockconsole.text.escape import printable

FORMATS = ("text", "logfmt", "json")
# syslog priorities, as sd-daemon(3) prefixes read them
_PRIORITY = {
    logging.DEBUG: 7,
    logging.INFO: 6,
    logging.WARNING: 4,
    logging.ERROR: 3,
    logging.CRITICAL: 2,
}
# the package's logger, parent of every module's `getLogger(__name__)`: "lockconsole"
PACKAGE = __name__.partition(".")[0]
FIELDS = "fields"  # the LogRecord attribute a structured line's fields ride in (`extra=`)


def under_journal(stream: IO[Any]) -> bool:
    """True when `stream` is the journal's: `$JOURNAL_STREAM` is "DEVICE:INODE" of its fd."""
    named = os.environ.get("JOURNAL_STREAM", "")
    device, _, inode = named.partition(":")
    if not (device.isdigit() and inode.isdigit()):
        return False
    try:
        st = os.fstat(stream.fileno())
    except (OSError, ValueError, AttributeError):
        return False
    return (st.st_dev, st.st_ino) == (int(device), int(inode))


def logfmt_value(value: object) -> str:
    """A logfmt value: bare when it can be, else quoted; control characters escaped."""
    text = printable(str(value))
    if not text or any(c in text for c in ' "=\\'):
        return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return text


class LogFormatter(logging.Formatter):
    """The one formatter of lockconsole's log lines, in `kind` (one of FORMATS)."""

    def __init__(self, kind: str = "text", *, journal: bool = False) -> None:
        super().__init__()
        self.kind, self.journal = kind, journal

    def format(self, record: logging.LogRecord) -> str:
        fields: dict[str, object] | None = getattr(record, FIELDS, None)
        if self.kind == "json":
            line = self._json(record, fields)
        elif self.kind == "logfmt":
            line = self._logfmt(record, fields)
        else:
            line = self._text(record)
        if self.journal:
            line = f"<{_PRIORITY.get(record.levelno, 6)}>{line}"
        return line

    def _when(self, record: logging.LogRecord) -> str:
        moment = datetime.fromtimestamp(record.created, UTC)
        return moment.isoformat(timespec="milliseconds").replace("+00:00", "Z")

    def _text(self, record: logging.LogRecord) -> str:
        head = "" if self.journal else f"{self.formatTime(record)} "
        line = f"{head}{record.levelname} {record.name} {printable(record.getMessage())}"
        if record.exc_info:
            line += " " + printable(self.formatException(record.exc_info))
        return line

    def _logfmt(self, record: logging.LogRecord, fields: dict[str, object] | None) -> str:
        pairs: dict[str, object] = {} if self.journal else {"time": self._when(record)}
        pairs.update(level=record.levelname.lower(), logger=record.name)
        if fields is not None:
            pairs.update(fields)
        else:
            pairs["msg"] = record.getMessage()
        if record.exc_info:
            pairs["exc"] = self.formatException(record.exc_info)
        return " ".join(f"{k}={logfmt_value(v)}" for k, v in pairs.items() if v is not None)

    def _json(self, record: logging.LogRecord, fields: dict[str, object] | None) -> str:
        doc: dict[str, object] = {} if self.journal else {"time": self._when(record)}
        doc.update(level=record.levelname.lower(), logger=record.name)
        doc.update(fields if fields is not None else {"message": record.getMessage()})
        if record.exc_info:
            doc["exc"] = self.formatException(record.exc_info)
        # ASCII only: every control or separator character becomes a \\u escape
        return json.dumps(doc, default=str, ensure_ascii=True)


def setup(kind: str = "text", *, quiet: bool = False, stream: IO[Any] | None = None) -> None:
    """Log lockconsole's records to `stream` (stderr) in `kind`, once per process.

    Every module logs under its own name (`getLogger(__name__)`), so the handler sits on the
    package's logger, `lockconsole`, and its level decides theirs. Another library's warnings
    (a driver's, say) reach the root logger; a second handler there takes them through the same
    formatter, so a JSON or logfmt stream holds no line of another shape and nothing raw.
    """
    stream = stream or sys.stderr
    formatter = LogFormatter(kind, journal=under_journal(stream))
    package, root = logging.getLogger(PACKAGE), logging.getLogger()
    for logger in (package, root):
        for old in [h for h in logger.handlers if getattr(h, "lockconsole", False)]:
            logger.removeHandler(old)
    ours = logging.StreamHandler(stream)
    foreign = logging.StreamHandler(stream)
    foreign.addFilter(lambda record: not is_ours(record.name))  # ours were written already
    for handler, logger in ((ours, package), (foreign, root)):
        handler.setFormatter(formatter)
        handler.lockconsole = True  # type: ignore[attr-defined]
        logger.addHandler(handler)
    package.setLevel(logging.WARNING if quiet else logging.INFO)


def is_ours(name: str) -> bool:
    """True for the logger of the package or of one of its modules."""
    return name == PACKAGE or name.startswith(PACKAGE + ".")
