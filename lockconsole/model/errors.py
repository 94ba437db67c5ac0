"""Errors: one root, each with a message an operator can act on."""

from __future__ import annotations


class LockconsoleError(Exception):
    """Root of every error lockconsole raises on purpose; str() is one line for an operator."""

    exit_code = 1


class ConfigError(LockconsoleError):
    """The configuration, a URL, a key or a CLI argument is wrong; nothing was done."""

    exit_code = 2

    def __init__(
        self,
        message: str,
        *,
        path: str | None = None,
        line: int | None = None,
        key: str | None = None,
    ) -> None:
        self.path, self.line, self.key, self.detail = path, line, key, message
        where = ""
        if path:
            where = path + (f":{line}" if line else "")
        if key:
            where = f"{where}: {key}" if where else key
        super().__init__(f"{where}: {message}" if where else message)


class UsageError(ConfigError):
    """A command-line argument is wrong."""


class MissingExtra(ConfigError):
    """An optional part of lockconsole is not installed: the message names the extra."""


class LedgerDenied(ConfigError):
    """The run ledger refused a statement for a missing privilege: permanent, never retried."""


class DatabaseError(LockconsoleError):
    """A database could not be reached or refused a statement; the message hides passwords."""

    exit_code = 5


class LockLostError(LockconsoleError):
    """The lock (or its connection) went away while the job ran."""

    exit_code = 4


class RunClosedError(LockconsoleError):
    """An attempt's outcome was not written: another instance had closed it (lock_lost)."""

    exit_code = 4
