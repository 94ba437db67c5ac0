"""The billing scenario: the database, its history, and the config the console reads.

Tables in the `billing` database (rebuilt on every start, so the story's timeline lines up
with the clock; the server's data directory is what is reused):

    tenants         150 tenants, 120 of them renew on the 1st (every compressed night is one)
    invoices        one row per charge, deliberately WITHOUT a unique key: the incident night's
                    triple charges stay here for the duplicate inspector to find, and a unique
                    key on (tenant_id, period) cannot be added while they do
    billing_claims  the idempotency safety net adopted with the fix: PRIMARY KEY (tenant_id,
                    period). The fleet charges a tenant only after
                    lockconsole.idempotency.claim() inserted its claim row, in the same
                    transaction as the invoice, so a rerun or a second holder cannot charge
                    twice. (A partial unique index on invoices would also do, but claim's
                    ON CONFLICT (tenant_id, period) cannot name a partial index's predicate.)
    lockconsole_runs  the run ledger: the incident night (web-1, web-2 and web-3 all ran:
                    three "succeeded" rows in one slot, the double-run alert), then nights
                    after the fix (one succeeded, two skipped), written with the Ledger API
"""

from __future__ import annotations

import json
import random
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias
from urllib.parse import urlsplit, urlunsplit

from lockconsole.backends.ledger.store import Ledger
from lockconsole.config.loader import Config, load_config
from lockconsole.console.snapshot.reports import firings
from lockconsole.demo import (
    BILLING_JOB,
    BILLING_KEY,
    DATABASE,
    INSTANCES,
    MYSQL_JOB,
    REMINDERS_JOB,
    REMINDERS_KEY,
)
from lockconsole.demo.billing import CONFIG_NAME, period_for
from lockconsole.engine.runner import SKIP_HELD
from lockconsole.model.errors import UsageError
from lockconsole.model.jobs import Outcome, Run, evolve

if TYPE_CHECKING:
    from psycopg import Connection
    from psycopg.rows import TupleRow

    _Conn: TypeAlias = Connection[TupleRow]  # the demo database, seeded in one transaction

TENANTS = 150
RENEWING = 120  # renew on the 1st: every compressed night
FIXED_NIGHTS = 4  # nights after the fix, before the live fleet takes over
MYSQL_URL_ENV = "LOCKCONSOLE_DEMO_MYSQL_URL"
NIGHT_DIVISORS = (2, 3, 4, 5, 6, 10, 12, 15, 20, 30, 60)

SCHEMA = (
    """CREATE TABLE tenants (
        id integer PRIMARY KEY, name text NOT NULL, plan text NOT NULL,
        amount_cents integer NOT NULL, renewal_day integer NOT NULL)""",
    """CREATE TABLE invoices (
        id bigserial PRIMARY KEY, tenant_id integer NOT NULL REFERENCES tenants,
        period text NOT NULL, amount_cents integer NOT NULL, instance text NOT NULL,
        run_id bigint, created_at timestamptz NOT NULL DEFAULT now())""",
    "CREATE INDEX invoices_tenant_period ON invoices (tenant_id, period)",
    """CREATE TABLE billing_claims (
        tenant_id integer NOT NULL REFERENCES tenants, period text NOT NULL,
        instance text NOT NULL, run_id bigint, claimed_at timestamptz NOT NULL DEFAULT now(),
        PRIMARY KEY (tenant_id, period))""",
)
INSERT_INVOICES = """
    INSERT INTO invoices (tenant_id, period, amount_cents, instance, run_id, created_at)
    SELECT id, %(period)s, amount_cents, %(instance)s, %(run_id)s, %(at)s
    FROM tenants WHERE renewal_day = 1 ORDER BY id"""
INSERT_CLAIMS = """
    INSERT INTO billing_claims (tenant_id, period, instance, run_id, claimed_at)
    SELECT id, %(period)s, %(instance)s, %(run_id)s, %(at)s
    FROM tenants WHERE renewal_day = 1"""
_WORDS = (
    "Acme",
    "Birch",
    "Cobalt",
    "Delta",
    "Ember",
    "Fjord",
    "Granite",
    "Harbor",
    "Iris",
    "Juniper",
    "Kestrel",
    "Lumen",
    "Meridian",
    "Nimbus",
    "Orchid",
)
_KINDS = (
    "Labs",
    "Logistics",
    "Health",
    "Studio",
    "Foods",
    "Energy",
    "Systems",
    "Retail",
    "Legal",
    "Works",
)
_PLANS = (("starter", 2900), ("team", 9900), ("business", 29900))


@dataclass(frozen=True)
class Scenario:
    """What the demo built: the config, the incident's slot, and the fleet's first slot."""

    config_path: Path
    config: Config
    billing_url: str
    incident_slot: datetime
    first_slot: datetime
    night_seconds: int


def night_schedule(night_seconds: int) -> str:
    """A six-field cron (seconds last, as croniter reads it) firing every `night_seconds`."""
    if night_seconds not in NIGHT_DIVISORS:
        allowed = ", ".join(str(n) for n in NIGHT_DIVISORS)
        raise UsageError(f"demo: --night-seconds must divide a minute evenly ({allowed})")
    return "* * * * * 0" if night_seconds == 60 else f"* * * * * */{night_seconds}"


def database_url(base_url: str, database: str) -> str:
    """`base_url` (the embedded server's) pointing at another database."""
    parts = urlsplit(base_url)
    return urlunsplit(parts._replace(path="/" + database))


def config_text(billing_url: str, night_seconds: int, mysql_url: str | None) -> str:
    """The demo's lockconsole.toml: a starting point to copy."""
    schedule = night_schedule(night_seconds)
    lines = [
        "# Written by `lockconsole demo`: the billing story on an embedded PostgreSQL.",
        '# Copy it as a starting point; a real nightly job would use schedule = "0 2 * * *".',
        "[lockconsole]",
        f"ledger_database = {json.dumps(DATABASE)}",
        "",
        f"[databases.{DATABASE}]",
        f"url = {json.dumps(billing_url)}",
    ]
    if mysql_url:
        lines += ["", "[databases.shop]", f"url = {json.dumps(_config_url(mysql_url))}"]
    lines += [
        "",
        "[console]",
        'refresh = "1s"',
        'idle_threshold = "30s"',
        f'grace = "{night_seconds}s"',
        'lookback = "1h"',
        "",
        f"[jobs.{BILLING_JOB}]",
        f"database = {json.dumps(DATABASE)}",
        f"schedule = {json.dumps(schedule)}      # a compressed night every {night_seconds} s",
        'timezone = "UTC"',
        'strategy = "pg-session"',
        f"key = {BILLING_KEY}",
        'callable = "lockconsole.demo.billing:nightly_billing"',
        f'max_duration = "{night_seconds}s"',
        "watchdog_interval = 1",
        "stop_grace = 5",
        "",
        f"[jobs.{BILLING_JOB}.idempotency]",
        'table = "invoices"',
        'key = ["tenant_id", "period"]',
        'run_column = "run_id"',
        "",
        f"[jobs.{REMINDERS_JOB}]",
        f"database = {json.dumps(DATABASE)}",
        'strategy = "pg-session"',
        f"key = {REMINDERS_KEY}",
        'callable = "lockconsole.demo.billing:invoice_reminders"',
        'max_duration = "2m"',
    ]
    if mysql_url:
        lines += [
            "",
            f"[jobs.{MYSQL_JOB}]",
            'database = "shop"',
            f"schedule = {json.dumps(schedule)}",
            'strategy = "mysql"',
            f"key = {json.dumps(MYSQL_JOB)}",
            'callable = "lockconsole.demo.billing:usage_rollup"',
            f'max_duration = "{night_seconds}s"',
            "watchdog_interval = 1",
        ]
    return "\n".join(lines) + "\n"


def build(
    base_url: str, directory: Path, night_seconds: int, mysql_url: str | None, now: datetime
) -> Scenario:
    """(Re)create the billing database and its history; write and load the config."""
    billing_url = database_url(base_url, DATABASE)
    if mysql_url:
        _check_mysql(mysql_url)
    path = directory / CONFIG_NAME
    path.write_text(config_text(billing_url, night_seconds, mysql_url), encoding="utf-8")
    config = load_config(str(path))
    _recreate_database(base_url)
    job = config.job(BILLING_JOB)
    slots = list(firings(job, now - timedelta(seconds=night_seconds * 20), now, FIXED_NIGHTS + 1))
    slots.reverse()  # oldest first: the incident, then the nights after the fix
    if len(slots) != FIXED_NIGHTS + 1:
        raise UsageError("demo: could not lay out the history on the schedule")
    _seed(billing_url, config, slots)
    first = firings(job, now, now + timedelta(seconds=night_seconds), 1)
    next_slot = next(iter(first), None) or slots[-1] + timedelta(seconds=night_seconds)
    if next_slot <= slots[-1]:
        next_slot = slots[-1] + timedelta(seconds=night_seconds)
    return Scenario(path, config, billing_url, slots[0], next_slot, night_seconds)


def _config_url(url: str) -> str:
    """The URL as the config spells it: a password stays in the environment, off the screen."""
    import os

    from lockconsole.config.urls import parse_url

    if parse_url(url).password is None:
        return url
    os.environ[MYSQL_URL_ENV] = url  # the console and the fleet read it from here
    return "${" + MYSQL_URL_ENV + "}"


def _check_mysql(url: str) -> None:
    from lockconsole.backends.connect import connect
    from lockconsole.config.urls import parse_url
    from lockconsole.model.errors import DatabaseError

    try:
        parsed = parse_url(url)
    except ValueError as exc:
        raise UsageError(f"demo: --mysql-url: {exc}") from None
    if parsed.dialect != "mysql":
        raise UsageError("demo: --mysql-url must be a mysql:// or mariadb:// URL")
    try:
        connect(parsed).close()
    except DatabaseError as exc:
        raise UsageError(f"demo: --mysql-url is unreachable: {exc}") from None


def _recreate_database(base_url: str) -> None:
    import psycopg
    from psycopg import sql

    with psycopg.connect(base_url, autocommit=True, application_name="lockconsole-demo") as conn:
        name = sql.Identifier(DATABASE)
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(name))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(name))


def _seed(url: str, config: Config, slots: list[datetime]) -> None:
    import psycopg

    rng = random.Random(4242)
    tenants = []
    for i in range(1, TENANTS + 1):
        plan, cents = rng.choice(_PLANS)
        name = f"{rng.choice(_WORDS)} {rng.choice(_KINDS)} {i:03d}"
        tenants.append((i, name, plan, cents, 1 if i <= RENEWING else 15))
    with psycopg.connect(url, application_name="lockconsole-demo") as conn:
        for statement in SCHEMA:
            conn.execute(statement)
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO tenants (id, name, plan, amount_cents, renewal_day) "
                "VALUES (%s, %s, %s, %s, %s)",
                tenants,
            )
        with Ledger(config.databases[DATABASE]) as ledger:
            _incident(conn, ledger, slots[0])
            _incident_holder(config, ledger, slots[0], slots[1] - slots[0])
            job = config.job(BILLING_JOB)
            for n, slot in enumerate(slots[1:]):
                _fixed_night(conn, ledger, slot, n, str(job.key))
        conn.commit()


def _run(slot: datetime, instance: str, offset: float, outcome: Outcome, **extra: Any) -> Run:
    """A scripted Run; `extra` sets more of its fields by name."""
    number = INSTANCES.index(instance) + 1
    run = Run(
        job=BILLING_JOB,
        slot=slot,
        instance=instance,
        host=instance,
        pid=4120 + number,
        trigger="scheduled",
        outcome=outcome,
        started_at=slot + timedelta(seconds=offset),
    )
    return evolve(run, **extra)


def _incident(conn: _Conn, ledger: Ledger, slot: datetime) -> None:
    """The night before the lock: every instance's scheduler billed every renewing tenant."""
    note = "ran unguarded: the in-app scheduler fired on every instance (before lockconsole)"
    for instance, offset in zip(INSTANCES, (0.31, 0.52, 0.18), strict=True):
        run = ledger.record(_run(slot, instance, offset, "acquired", message=note))
        done = slot + timedelta(seconds=offset + 2.4)
        _charges(conn, slot, instance, run.id, done, claims=False)
        ledger.finish(run, "succeeded", exit_code=0, message=note, finished_at=done)


ONCALL_PID = 28731  # the on-call's psql session on the incident night


def _incident_holder(config: Config, ledger: Ledger, slot: datetime, night: timedelta) -> None:
    """What the holder journal and the audit kept of the incident night: the on-call held lock
    4242 from psql, believing it kept billing off, but the in-app schedulers took no lock and
    billed anyway; a console released the session a few seconds after the slot."""
    from lockconsole.backends.audit import AuditLog
    from lockconsole.backends.ledger import journal
    from lockconsole.backends.ledger.schema import JOURNAL_TABLE, schema

    engine = ledger.sa_engine()
    journal.ensure_journal(engine)
    # around the slot, in the compressed night's proportions (a 20 s night: 6 s before, 7 s after)
    seen_after, first, last, released, gone = (
        slot + night * f for f in (-0.3, -0.2, 0.25, 0.3, 0.35)
    )
    row = {
        "holding": f"demo-incident-{ONCALL_PID}",
        "open_mark": None,
        "database_name": DATABASE,
        "kind": "advisory",
        "source": "pg_locks",
        "lock_key": str(BILLING_KEY),
        "job": BILLING_JOB,
        "pid": ONCALL_PID,
        "application": "psql",
        "client": "10.0.9.4",
        "username": "oncall",
        "mode": "ExclusiveLock",
        "session_start": slot - timedelta(minutes=6),
        "seen_after": seen_after,
        "first_seen": first,
        "last_seen": last,
        "gone_by": gone,
        "from_epoch": journal.epoch(seen_after),
        "held_seconds": journal.epoch(gone) - journal.epoch(seen_after),
    }
    with engine.begin() as conn:
        conn.execute(schema()[0].tables[JOURNAL_TABLE].insert().values(row))
    audit = AuditLog(config.databases[DATABASE])
    try:
        audit.ensure()
        with audit.engine.begin() as conn:
            conn.execute(
                audit.table.insert().values(
                    at=released,
                    os_user="oncall",
                    host="ops-1",
                    action="release",
                    database_name=DATABASE,
                    target=f"pg advisory key {BILLING_KEY} (int64) held by pid {ONCALL_PID} "
                    f"in database {DATABASE}",
                    result="released",
                    message=f"pid {ONCALL_PID} terminated in 11 ms",
                    job=BILLING_JOB,
                )
            )
    finally:
        audit.engine.dispose()


def _fixed_night(conn: _Conn, ledger: Ledger, slot: datetime, n: int, key: str) -> None:
    """A night after the fix: one instance got lock 4242 and billed, the other two skipped."""
    winner = INSTANCES[(n + 1) % len(INSTANCES)]
    for i, instance in enumerate(INSTANCES):
        offset = 0.2 + 0.15 * ((i + n) % 3)
        if instance != winner:
            finished = slot + timedelta(seconds=offset + 0.06)
            ledger.record(
                _run(
                    slot,
                    instance,
                    offset + 0.05,
                    "skipped",
                    strategy="pg-session",
                    lock_key=key,
                    message=SKIP_HELD,
                    finished_at=finished,
                )
            )
            continue
        run = ledger.record(
            _run(slot, instance, offset, "acquired", strategy="pg-session", lock_key=key)
        )
        done = slot + timedelta(seconds=offset + 2.1)
        _charges(conn, slot, instance, run.id, done, claims=True)
        message = f"billed {RENEWING} tenants for {period_for(slot)}"
        ledger.finish(run, "succeeded", exit_code=0, message=message, finished_at=done)


def _charges(
    conn: _Conn, slot: datetime, instance: str, run_id: int | None, at: datetime, *, claims: bool
) -> None:
    params = {"period": period_for(slot), "instance": instance, "run_id": run_id, "at": at}
    if claims:
        conn.execute(INSERT_CLAIMS, params)
    conn.execute(INSERT_INVOICES, params)
