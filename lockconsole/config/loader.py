"""lockconsole.toml -> frozen dataclasses.

Search order (the first that exists wins):
  1. --config PATH
  2. $LOCKCONSOLE_CONFIG
  3. ./lockconsole.toml
  4. $XDG_CONFIG_HOME/lockconsole/config.toml (default ~/.config/lockconsole/config.toml)

Every mistake raises ConfigError naming the file, the line and the key.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from typing import Any

from lockconsole.config import ledger_commit as config_ledger_commit
from lockconsole.config import redis as config_redis
from lockconsole.config import sharing
from lockconsole.config.checks import (  # noqa: F401  (re-exported: public names of this module)
    IDENTIFIER,
    JOB_NAME,
    check_callable,
    check_column,
    check_command,
    check_cron,
    check_identifier,
    check_job_name,
    check_seconds,
    check_timezone,
    parse_duration,
)
from lockconsole.config.idempotency import KEYS as IDEMPOTENCY_KEYS
from lockconsole.config.idempotency import parse_idempotency
from lockconsole.config.key_lines import locate
from lockconsole.config.keymap import check_keymap
from lockconsole.config.search import SEARCH_ORDER_HELP, find_config  # noqa: F401  (public here too)
from lockconsole.config.settings import (
    ConsoleSettings,
    LedgerSettings,
    parse_console,
    parse_ledger,
)
from lockconsole.config.urls import expand_env, parse_url
from lockconsole.model import keys
from lockconsole.model.errors import ConfigError
from lockconsole.model.jobs import (
    DEFAULT_STRATEGY,
    JOB_DEFAULTS,
    STRATEGIES,
    Database,
    Idempotency,
    Job,
)

STRATEGY_DIALECTS = {
    "pg-session": ("postgresql",),
    "pg-xact": ("postgresql",),
    "mysql": ("mysql",),
    "lease": ("postgresql", "mysql", "sqlite"),
    "redis": ("redis",),
}
_TOP_KEYS = {"lockconsole", "databases", "jobs", "console", "keys", "ledger"}
_SETTINGS_KEYS = {"ledger_database", "instance"}
_DATABASE_KEYS = {"url", "scan_prefixes"}
_JOB_KEYS = {
    "database", "schedule", "timezone", "strategy", "key", "key_recipe", "command", "callable",
    "max_duration", "min_hold", "idempotency", "lease_table", "once_per_slot", "watchdog_interval",
    "stop_grace", "lock_check_timeout", "allow_pooler", "redis_prefix", "ledger_commit",
    "lock_group", "rerun_abandoned",
}  # fmt: skip
_FLAGS = ("once_per_slot", "allow_pooler", "rerun_abandoned")  # the true/false keys


@dataclass(frozen=True)
class Config:
    path: str
    databases: Mapping[str, Database]
    jobs: Mapping[str, Job]
    ledger_database: str | None = None
    instance: str | None = None
    console: ConsoleSettings = field(default_factory=ConsoleSettings)
    keymap: Mapping[str, str] = field(default_factory=dict)
    retention: timedelta | None = None  # [ledger] retention: None keeps every row
    ledger: LedgerSettings = field(default_factory=LedgerSettings)  # all of [ledger]

    def job(self, name: str) -> Job:
        try:
            return self.jobs[name]
        except KeyError:
            known = ", ".join(sorted(self.jobs)) or "none configured"
            raise ConfigError(f"no job named {name!r} (jobs: {known})", path=self.path) from None

    def database_for(self, job: Job) -> Database:
        return self.databases[job.database]

    def ledger_for(self, job: Job) -> Database:
        """The database that keeps the run ledger of `job`."""
        return self.databases[self.ledger_database or job.database]


def load_config(explicit: str | None = None, environ: Mapping[str, str] | None = None) -> Config:
    path = find_config(explicit, environ)
    try:
        raw = path.read_bytes()
    except OSError as exc:
        raise ConfigError(f"cannot read the file: {exc.strerror or exc}", path=str(path)) from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        line = raw[: exc.start].count(b"\n") + 1
        raise ConfigError(
            f"not a UTF-8 text file (byte 0x{raw[exc.start]:02x}); a config file is TOML",
            path=str(path),
            line=line,
        ) from None
    return parse_config(text, str(path), environ)


def parse_config(
    text: str, path: str = "<config>", environ: Mapping[str, str] | None = None
) -> Config:
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        msg = str(exc)
        m = re.search(r"\(at line (\d+), column \d+\)", msg)
        line = int(m.group(1)) if m else None
        msg = re.sub(r"\s*\(at line \d+, column \d+\)", "", msg)
        raise ConfigError(f"not valid TOML: {msg}", path=path, line=line) from None
    return _Builder(text, path, dict(os.environ if environ is None else environ)).build(data)


class _Builder:
    """Turns parsed TOML into a Config, locating each error's line in the source text."""

    def __init__(self, text: str, path: str, environ: dict[str, str]) -> None:
        self.lines = text.splitlines()
        self.path = path
        self.environ = environ

    def error(self, table: tuple[str, ...], key: str | None, message: str) -> ConfigError:
        dotted = ".".join((*table, key) if key else table)
        return ConfigError(message, path=self.path, line=self.locate(table, key), key=dotted)

    def locate(self, table: tuple[str, ...], key: str | None) -> int | None:
        """The line of `key` inside `[table]` (or of the header, or of a dotted key)."""
        return locate(self.lines, table, key)

    def table(self, value: object, where: tuple[str, ...], allowed: set[str]) -> dict[str, Any]:
        if not isinstance(value, dict):
            raise self.error(where[:-1], where[-1], "must be a table")
        for k in value:
            if k not in allowed:
                raise self.error(where, k, f"unknown key (allowed: {', '.join(sorted(allowed))})")
        return value

    def build(self, data: dict[str, Any]) -> Config:
        for k in data:
            if k not in _TOP_KEYS:
                raise self.error(
                    (), k, f"unknown section (allowed: {', '.join(sorted(_TOP_KEYS))})"
                )
        settings = self.table(data.get("lockconsole", {}), ("lockconsole",), _SETTINGS_KEYS)
        databases = self.databases(data.get("databases", {}))
        jobs = {}
        raw_jobs = data.get("jobs", {})
        if not isinstance(raw_jobs, dict):
            raise self.error((), "jobs", "must be a table of jobs")
        for name, raw in raw_jobs.items():
            jobs[name] = self.job(name, raw, databases)
        if clash := sharing.clash(jobs, databases):
            raise self.error(("jobs", clash[0]), clash[1], clash[2])
        ledger = settings.get("ledger_database")
        if ledger is not None and (not isinstance(ledger, str) or ledger not in databases):
            known = ", ".join(sorted(databases)) or "none"
            raise self.error(
                ("lockconsole",),
                "ledger_database",
                f"no database named {ledger!r} (databases: {known})",
            )
        if problem := config_redis.ledger_problem(databases, ledger):
            raise self.error(("lockconsole",), "ledger_database", problem)
        for name, job in jobs.items():
            if problem := config_ledger_commit.async_problem(job, databases, ledger):
                raise self.error(("jobs", name), "ledger_commit", problem)
        instance = settings.get("instance")
        if instance is not None and (not isinstance(instance, str) or not instance.strip()):
            raise self.error(("lockconsole",), "instance", "must be a non-empty string")
        console = data.get("console", {})
        keymap = data.get("keys", {})
        if not isinstance(console, dict):
            raise self.error((), "console", "must be a table")
        console_settings = parse_console(
            console, lambda key, msg: self.error(("console",), key, msg)
        )
        if not isinstance(keymap, dict):
            raise self.error((), "keys", 'must be a table of action = "key"')
        check_keymap(keymap, lambda action, msg: self.error(("keys",), action, msg))
        raw_ledger = self.table(
            data.get("ledger", {}), ("ledger",), {"retention", "journal", "journal_every"}
        )
        ledger_settings = parse_ledger(
            raw_ledger, lambda k, msg: self.error(("ledger",), k, msg), console_settings.lookback
        )
        return Config(
            self.path,
            databases,
            jobs,
            ledger,
            instance,
            console_settings,
            keymap,
            ledger_settings.retention,
            ledger_settings,
        )

    def databases(self, raw: object) -> dict[str, Database]:
        if not isinstance(raw, dict):
            raise self.error((), "databases", "must be a table of databases")
        out = {}
        for name, spec in raw.items():
            where = ("databases", name)
            spec = self.table(spec, where, _DATABASE_KEYS)
            if "url" not in spec:
                raise self.error(where, None, "missing key 'url'")
            if not isinstance(spec["url"], str):
                raise self.error(where, "url", "must be a string like 'postgresql://user@host/db'")
            try:
                url = parse_url(expand_env(spec["url"], self.environ))
            except ValueError as exc:
                raise self.error(where, "url", str(exc)) from None
            try:
                prefixes = config_redis.scan_prefixes(spec.get("scan_prefixes", ["job-lock:"]))
            except ValueError as exc:
                raise self.error(where, "scan_prefixes", str(exc)) from None
            out[name] = Database(name, url, prefixes if url.dialect == "redis" else ())
        return out

    def job(self, name: str, raw: object, databases: dict[str, Database]) -> Job:
        where = ("jobs", name)
        try:
            check_job_name(name)
        except ValueError as exc:
            raise self.error(where, None, str(exc)) from None
        spec = self.table(raw, where, _JOB_KEYS)
        field_error = self.field_error(where)

        database = spec.get("database")
        if database is None:
            if not databases:
                raise self.error(
                    where, None, "no databases configured (add [databases.NAME] with url = ...)"
                )
            if len(databases) != 1:
                known = ", ".join(sorted(databases))
                raise self.error(where, None, f"missing key 'database' (one of: {known})")
            database = next(iter(databases))
        if not isinstance(database, str) or database not in databases:
            known = ", ".join(sorted(databases)) or "none"
            raise field_error("database", f"no database named {database!r} (databases: {known})")

        strategy = spec.get("strategy", DEFAULT_STRATEGY)
        if strategy not in STRATEGIES:
            raise field_error(
                "strategy", f"unknown strategy {strategy!r} (choose {', '.join(STRATEGIES)})"
            )
        dialect = databases[database].url.dialect
        if dialect not in STRATEGY_DIALECTS[strategy]:
            hint = "" if "strategy" in spec else " (pg-session is the default strategy)"
            raise field_error(
                "strategy",
                f"{strategy} needs a {' or '.join(STRATEGY_DIALECTS[strategy])} database, "
                f"and {database!r} is {dialect}{hint}",
            )

        recipe = spec.get("key_recipe", "sha256")
        if recipe not in keys.RECIPES:
            raise field_error(
                "key_recipe", f"unknown recipe {recipe!r} (choose {', '.join(keys.RECIPES)})"
            )
        group = self.checked(where, "lock_group", sharing.check_group, spec.get("lock_group"))
        key = self.checked(
            where,
            "key",
            lambda k: sharing.job_key(name, strategy, k, recipe, group),
            spec.get("key"),
        )

        schedule = spec.get("schedule")
        if schedule is not None:
            self.checked(where, "schedule", check_cron, schedule)
        timezone = self.checked(
            where, "timezone", check_timezone, spec.get("timezone", JOB_DEFAULTS["timezone"])
        )

        command = spec.get("command")
        target = spec.get("callable")
        if command is not None and target is not None:
            raise field_error("callable", "give either 'command' or 'callable', not both")
        if command is not None:
            command = self.checked(where, "command", check_command, command)
        if target is not None:
            self.checked(where, "callable", check_callable, target)

        durations = {}
        for k in ("max_duration", "min_hold"):
            if k in spec:
                try:
                    durations[k] = parse_duration(spec[k])
                except ValueError as exc:
                    raise field_error(k, str(exc)) from None
        max_duration = durations.get("max_duration")
        min_hold = durations.get("min_hold", JOB_DEFAULTS["min_hold"])
        if max_duration is not None and max_duration <= timedelta(0):
            raise field_error("max_duration", "must be longer than zero")
        if strategy in ("lease", "redis") and max_duration is None:
            max_duration = timedelta(hours=1)
        if max_duration is not None and min_hold > max_duration:
            raise field_error(
                "min_hold", f"{min_hold} must not be longer than max_duration ({max_duration})"
            )

        numbers = {}
        for k in ("watchdog_interval", "stop_grace"):
            try:
                numbers[k] = check_seconds(spec.get(k, JOB_DEFAULTS[k]))
            except ValueError as exc:
                raise field_error(k, str(exc)) from None
        check_timeout = spec.get("lock_check_timeout")
        try:  # unset: the job's check_timeout follows its watchdog_interval
            check_timeout = None if check_timeout is None else check_seconds(check_timeout)
        except ValueError as exc:
            raise field_error("lock_check_timeout", str(exc)) from None

        flags = {k: spec.get(k, JOB_DEFAULTS[k]) for k in _FLAGS}
        for k, flag in flags.items():
            if not isinstance(flag, bool):
                raise field_error(k, f"must be true or false, not {flag!r}")
        commit = self.checked(
            where,
            "ledger_commit",
            config_ledger_commit.check,
            spec.get("ledger_commit", JOB_DEFAULTS["ledger_commit"]),
        )
        lease_table = spec.get("lease_table", JOB_DEFAULTS["lease_table"])
        redis_prefix = spec.get("redis_prefix", JOB_DEFAULTS["redis_prefix"])
        self.checked(where, "redis_prefix", config_redis.check_prefix, redis_prefix)
        self.checked(where, "lease_table", check_identifier, lease_table)

        idempotency = None
        if "idempotency" in spec:
            idempotency = self.idempotency(where + ("idempotency",), spec["idempotency"])

        return Job(
            name=name,
            database=database,
            strategy=strategy,
            key=key,
            schedule=schedule,
            timezone=timezone,
            command=command,
            callable=target,
            max_duration=max_duration,
            min_hold=min_hold,
            idempotency=idempotency,
            lease_table=lease_table,
            once_per_slot=flags["once_per_slot"],
            rerun_abandoned=flags["rerun_abandoned"],
            watchdog_interval=numbers["watchdog_interval"],
            stop_grace=numbers["stop_grace"],
            lock_check_timeout=check_timeout,
            allow_pooler=flags["allow_pooler"],
            redis_prefix=redis_prefix,
            ledger_commit=commit,
            lock_group=group,
        )

    def field_error(self, where: tuple[str, ...]) -> Callable[[str | None, str], ConfigError]:
        return lambda key, message: self.error(where, key, message)

    def checked(
        self, where: tuple[str, ...], key: str, check: Callable[[Any], Any], value: Any
    ) -> Any:
        """check(value), or the ConfigError of `key` in `where` saying why not."""
        try:
            return check(value)
        except ValueError as exc:
            raise self.error(where, key, str(exc)) from None

    def idempotency(self, where: tuple[str, ...], raw: object) -> Idempotency:
        spec = self.table(raw, where, IDEMPOTENCY_KEYS)
        return parse_idempotency(spec, self.field_error(where))
