"""Checks of single configuration values; each raises ValueError with a one-line reason."""

from __future__ import annotations

import math
import re
from datetime import UTC, timedelta, tzinfo

from lockconsole.model import cron

IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,62}(\.[A-Za-z_][A-Za-z0-9_]{0,62})?")
JOB_NAME = re.compile(r"[A-Za-z0-9_][A-Za-z0-9_.:-]{0,63}")
CALLABLE = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*:[A-Za-z_]\w*(\.[A-Za-z_]\w*)*", re.ASCII)
_DURATION_PART = re.compile(r"(\d+(?:\.\d+)?)(ms|s|m|h|d)")
_DURATION = re.compile(r"(?:\d+(?:\.\d+)?(?:ms|s|m|h|d))+")
_UNITS = {"ms": 0.001, "s": 1, "m": 60, "h": 3600, "d": 86400}
MAX_SECONDS = 366 * 86400 * 100  # a century: anything longer is a typo
_DURATION_HELP = "a duration is like '30s', '5m', '2h', '1h30m', '500ms' or a number of seconds"


def parse_duration(value: object) -> timedelta:
    """'2h', '5m', '1h30m', '500ms', '45s' or a number of seconds."""
    if isinstance(value, bool):
        raise ValueError(f"{_DURATION_HELP}, not true/false")
    if isinstance(value, int | float):
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"{_DURATION_HELP}, not {value}")
        if value < 0:
            raise ValueError(f"a duration must not be negative (got {value})")
        seconds = float(value)
    elif isinstance(value, str):
        text = value.strip().lower().replace(" ", "")
        if text.startswith("-"):
            raise ValueError(f"a duration must not be negative (got {value!r})")
        if not _DURATION.fullmatch(text):
            raise ValueError(f"{value!r} is not a duration ({_DURATION_HELP})")
        seconds = sum(float(n) * _UNITS[u] for n, u in _DURATION_PART.findall(text))
    else:
        raise ValueError(f"{_DURATION_HELP}, not {value!r}")
    if seconds > MAX_SECONDS:
        raise ValueError(f"{value!r} is too long for a duration (at most 100 years)")
    return timedelta(seconds=seconds)


def check_seconds(value: object) -> float:
    """A positive interval: a duration string or a number of seconds."""
    seconds = parse_duration(value).total_seconds()
    if seconds <= 0:
        raise ValueError("must be a positive number of seconds or a duration like '5s'")
    return seconds


def check_identifier(value: object) -> str:
    """A plain SQL name (optionally schema.name); anything else is refused, never quoted in."""
    if not isinstance(value, str) or not IDENTIFIER.fullmatch(value):
        raise ValueError(
            f"{value!r} is not a plain table or column name "
            "(letters, digits and _, at most 63, optionally schema.name)"
        )
    return value


def check_column(value: object) -> str:
    """A plain column name, without a table or schema."""
    name = check_identifier(value)
    if "." in name:
        raise ValueError(f"{name!r}: a column is a plain name, without a table")
    return name


def check_job_name(name: str) -> str:
    if not JOB_NAME.fullmatch(name):
        raise ValueError(
            f"{name!r} is not a job name (1-64 letters, digits, _ . : -, no spaces or slashes)"
        )
    return name


def check_command(value: object) -> tuple[str, ...]:
    """A job's command: a list of non-empty strings (a single string is a one-word command)."""
    words = [value] if isinstance(value, str) else value
    if not isinstance(words, list) or not words or not all(isinstance(a, str) and a for a in words):
        raise ValueError('must be a list of strings, like ["python", "-m", "billing"]')
    return tuple(words)


def check_callable(value: object) -> str:
    if not isinstance(value, str) or not CALLABLE.fullmatch(value):
        raise ValueError(f"{value!r} is not 'package.module:function'")
    return value


def check_cron(expr: object) -> str:
    if not isinstance(expr, str):
        raise ValueError(f"a schedule is a cron string like '0 2 * * *', not {expr!r}")
    if cron.parse(expr) is not None:  # plain five fields: valid, without importing croniter
        return expr
    from croniter import croniter

    fields = expr.split()
    try:
        shape = len(fields) in (5, 6) or len(fields) == 1 and expr.strip().startswith("@")
        valid = shape and bool(croniter.is_valid(expr))
    except Exception:  # croniter raises assorted errors on garbage
        valid = False
    if not valid:
        raise ValueError(
            f"{expr!r} is not a valid cron expression "
            "(minute hour day month weekday, like '0 2 * * *'; a sixth field is seconds)"
        )
    return expr


def check_timezone(name: object) -> str:
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    if not isinstance(name, str) or not name:
        raise ValueError(f"a time zone is a name like 'UTC' or 'Europe/Berlin', not {name!r}")
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        raise ValueError(
            f"unknown time zone {name!r} (expected an IANA name like 'UTC' or 'Europe/Berlin')"
        ) from None
    return name


def zone_named(name: str) -> tzinfo:
    """The zone of a `[console] timezone` name (UTC for 'UTC'); ValueError when unknown."""
    if name.upper() == "UTC":
        return UTC
    from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {name!r} (an IANA name, e.g. Europe/Berlin)") from None
