"""The starter lockconsole.toml that `lockconsole init` writes: commented, valid as it stands.

Everything read from the database (lock keys, application names, table names) is data: it goes
into comments through `shown` (control characters escaped, one line) and into values as TOML
strings, so nothing the database says can change the file's structure.
"""

from __future__ import annotations

import json
import re
from datetime import datetime
from typing import TYPE_CHECKING

from lockconsole.model.jobs import DatabaseURL
from lockconsole.text.safe import shown

if TYPE_CHECKING:
    from lockconsole.backends.probe import Probe
    from lockconsole.model.views import Holder

PASSWORD_VARIABLE = "LOCKCONSOLE_DB_PASSWORD"
MAX_HOLDER_JOBS = 20  # keys offered as jobs; the rest are counted


def _comment(text: str, width: int = 200) -> str:
    return shown(text)[:width]


def url_line(url: DatabaseURL) -> tuple[str, str | None]:
    """The URL as the file states it: a password becomes ${LOCKCONSOLE_DB_PASSWORD}."""
    if not url.password:
        return url.raw, None
    scheme, rest = url.raw.split("://", 1)
    userinfo, at, tail = rest.rpartition("@")
    user = userinfo.split(":", 1)[0]
    return f"{scheme}://{user}:${{{PASSWORD_VARIABLE}}}{at}{tail}", PASSWORD_VARIABLE


def strategy_for(probe: Probe | None) -> tuple[str, str]:
    """The strategy to suggest and why."""
    if probe is None:
        return "pg-session", "no database was probed"
    if probe.dialect == "mysql":
        return "mysql", "GET_LOCK on MySQL/MariaDB"
    pooler = probe.pooler
    if pooler is not None and pooler.detected and pooler.pool_mode != "session":
        mode = pooler.pool_mode or "unknown"
        return "pg-xact", (
            f"a pooler ({pooler.kind}, {mode} pooling) sits in front: a session lock would stay "
            "on a server connection other clients then share; pg-xact's ends with its transaction"
        )
    return "pg-session", "a direct connection: a session-level advisory lock"


def _job_name(holder: Holder) -> str:
    slug = re.sub(r"[^A-Za-z0-9_]+", "_", holder.key).strip("_").lower()[:40]
    return f"held_{slug or 'key'}"


def _key_value(holder: Holder) -> str:
    if holder.key_kind == "int4pair":
        first, second = holder.key.split(",")
        return f"[{int(first)}, {int(second)}]"
    if holder.key_kind == "int64":
        return str(int(holder.key))
    return json.dumps(holder.key)


def _holder_jobs(probe: Probe, strategy: str) -> list[str]:
    held = [h for h in probe.holders if h.granted and h.kind in ("advisory", "user_lock")]
    seen: dict[str, Holder] = {}
    for holder in held:
        seen.setdefault(holder.key, holder)
    lines: list[str] = []
    if not seen:
        return ["# No advisory lock is held right now: nothing to map to a job yet."]
    lines.append(f"# Locks held right now ({len(seen)}): map each one to the job that takes it.")
    for holder in list(seen.values())[:MAX_HOLDER_JOBS]:
        who = holder.application_name or holder.user or "?"
        lines += [
            f"# key {_comment(holder.key, 60)}: held by pid {holder.pid} ({_comment(who, 60)})",
            f"# [jobs.{_job_name(holder)}]",
            f"# key = {_key_value(holder)}",
            f'# strategy = "{strategy}"',
            '# schedule = "0 2 * * *"',
            '# command = ["your", "job"]',
            "",
        ]
    if len(seen) > MAX_HOLDER_JOBS:
        lines.append(f"# ... and {len(seen) - MAX_HOLDER_JOBS} more keys (lockconsole locks)")
    return lines


def _lease_jobs(probe: Probe) -> list[str]:
    lines: list[str] = []
    for table in probe.lease_tables:
        lines += [
            f"# A ShedLock table: {_comment(table, 100)}. A job that shares it with ShedLock:",
            "# [jobs.your_shedlock_job]",
            '# strategy = "lease"',
            f"# lease_table = {json.dumps(table)}",
            '# schedule = "0 3 * * *"',
            '# max_duration = "1h"',
            "",
        ]
    return lines


def _privileges(probe: Probe) -> list[str]:
    view = probe.view_grant
    release = probe.release_grant
    lines = [
        f"#   account: {_comment(probe.user, 100)}",
        "#   viewing every holder's session: "
        + ("yes" if view is None else f"no, other sessions are hidden; run: {view}"),
        "#   releasing (ending) other sessions: "
        + ("yes" if release is None else f"no; run: {release}"),
    ]
    lines += [f"#   note: {_comment(note)}" for note in probe.notes]
    return lines


def render(url: DatabaseURL | None, probe: Probe | None, now: datetime) -> str:
    """The starter file's text."""
    strategy, why = strategy_for(probe)
    lines = [
        f"# lockconsole.toml, written by `lockconsole init` on {now:%Y-%m-%d %H:%M} UTC.",
        "# Check it with `lockconsole config`; open the console with `lockconsole`.",
        "",
    ]
    if probe is not None:
        lines.append("# What the database said:")
        lines.append(f"#   server: {_comment(probe.server, 100)}")
        if probe.pooler is not None:
            state = "yes" if probe.pooler.detected else "no"
            lines.append(f"#   pooler in front: {state} ({_comment(probe.pooler.evidence, 400)})")
        lines += _privileges(probe)
        lines.append("")
    lines.append("[databases.main]")
    if url is None:
        lines.append('url = "postgresql://app:${DB_PASSWORD}@db.internal:5432/app"   # edit me')
    else:
        text, variable = url_line(url)
        lines.append(f"url = {json.dumps(text)}")
        if variable:
            lines.append(f"# the password is read from ${variable}: export it before running")
    lines += [
        "",
        f"# Suggested strategy: {strategy} ({why}).",
        "# A job: uncomment and fill in. Each runs once per slot across every instance.",
        "# [jobs.nightly_report]",
        f'# strategy = "{strategy}"',
        '# schedule = "0 2 * * *"          # cron, read in timezone (default UTC)',
        '# command = ["python", "-m", "app.nightly_report"]',
        "# # key = 4242                    # omitted: derived from the job name",
        "",
    ]
    if probe is not None:
        lines += _holder_jobs(probe, strategy)
        lines.append("")
        lines += _lease_jobs(probe)
    return "\n".join(lines).rstrip() + "\n"
