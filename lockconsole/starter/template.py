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
from urllib.parse import unquote_plus

from lockconsole.model.jobs import DatabaseURL
from lockconsole.text.safe import shown

if TYPE_CHECKING:
    from lockconsole.backends.probe import Probe
    from lockconsole.model.views import Holder

PASSWORD_VARIABLE = "LOCKCONSOLE_DB_PASSWORD"
MAX_HOLDER_JOBS = 20  # keys offered as jobs; the rest are counted


def _comment(text: str, width: int = 200) -> str:
    return shown(text)[:width]


_SECRET_KEY = re.compile(r"(?i)(pass(word|wd)?|secret|token)$")
_ENV_REFERENCE = re.compile(r"\$\{[A-Za-z_][A-Za-z0-9_]*\}")


def _variable_for(key: str) -> str:
    """The environment variable a query's secret `key` is read from in the written file."""
    slug = re.sub(r"[^A-Za-z0-9]+", "_", key).strip("_").upper()
    return PASSWORD_VARIABLE if slug == "PASSWORD" else f"LOCKCONSOLE_DB_{slug or 'SECRET'}"


def url_line(raw: str) -> tuple[str, list[str]]:
    """The URL as the file states it, and what was done to each secret in it.

    `raw` is the URL as given, before ${ENV} expansion. No password is written in any form: a
    password in the user-info, and every query parameter whose (percent-decoded) name ends in
    pass, passwd, password, secret or token (`password=`, libpq's `sslpassword=`, PyMySQL's
    `ssl_key_password=`), becomes a ${NAME} reference; one that already is a reference is kept.
    """
    notes: list[str] = []
    scheme, sep, rest = raw.partition("://")
    rest, hash_mark, fragment = rest.partition("#")
    rest, question, query = rest.partition("?")
    userinfo, at, hostpath = rest.rpartition("@")
    if at:
        user, colon, password = userinfo.partition(":")
        if colon and password and not _ENV_REFERENCE.fullmatch(password):
            userinfo = f"{user}:${{{PASSWORD_VARIABLE}}}"
            notes.append(f"the URL's password was replaced by ${{{PASSWORD_VARIABLE}}}")
        rest = f"{userinfo}@{hostpath}"
    pairs = []
    for pair in query.split("&") if query else []:
        key, equals, value = pair.partition("=")
        name = unquote_plus(key)
        if equals and value and _SECRET_KEY.search(name) and not _ENV_REFERENCE.fullmatch(value):
            variable = _variable_for(name)
            pair = f"{key}=${{{variable}}}"
            notes.append(f"the URL's {name}= was replaced by ${{{variable}}}")
        pairs.append(pair)
    text = f"{scheme}{sep}{rest}{question}{'&'.join(pairs)}{hash_mark}{fragment}"
    return text, notes


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


def render(
    url: DatabaseURL | None, probe: Probe | None, now: datetime, given_url: str | None = None
) -> str:
    """The starter file's text; `given_url` is the URL as given, before ${ENV} expansion."""
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
        text, notes = url_line(given_url or url.raw)
        lines.append(f"url = {json.dumps(text)}")
        lines += [f"# {note}: export it (percent-encoded, as in a URL)" for note in notes]
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
