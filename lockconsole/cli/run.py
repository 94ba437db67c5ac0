"""`lockconsole run` (for crontabs and systemd timers) and `lockconsole schedule`.

Exit codes of `run`: 0 the job ran and succeeded; 3 skipped (another instance holds the
lock, the slot already ran, or the job is paused); 4 the lock was lost while the job ran;
5 a database could not be reached; 2 usage or configuration error; any other non-zero code
is the job's own (a job exiting with 2-5 is reported as 1; its real code is in the ledger and
--json).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import logging
import math
import sys
from dataclasses import asdict
from datetime import UTC, datetime
from typing import TYPE_CHECKING

from lockconsole.model.context import qualified_run_id
from lockconsole.model.errors import UsageError

if TYPE_CHECKING:
    from lockconsole.config.loader import Config
    from lockconsole.engine.execute import Target
    from lockconsole.model.jobs import Job, Run

RUN_EPILOG = __doc__.split("\n\n", 1)[1]
log = logging.getLogger(__name__)


def add_parsers(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "run",
        help="run a job once across all instances (for crontabs)",
        description="Try the job's lock once; run the job if this instance got it.",
        epilog=RUN_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("job", help="the job's name in the config")
    p.add_argument("--instance", metavar="NAME", help="this instance's name (default: host name)")
    p.add_argument("--slot", metavar="ISO_TIME", help="the slot this attempt belongs to")
    p.add_argument("--manual", action="store_true", help="a manual run: its own slot")
    p.add_argument("--json", action="store_true", help="print the attempt as one JSON object")
    p.add_argument("-q", "--quiet", action="store_true", help="log warnings only")
    p.add_argument(
        "--log-format",
        choices=("text", "logfmt", "json"),
        default="text",
        help="how log lines look on stderr (under systemd: no timestamps, syslog priorities)",
    )
    p.epilog = f"{p.epilog}\n\nGive the command after --: lockconsole run JOB -- CMD ARG ..."
    p.set_defaults(handler=run_command)

    s = sub.add_parser(
        "schedule",
        help="fire every job at its cron times, on this instance, and serve its run requests",
    )
    s.add_argument("--instance", metavar="NAME", help="this instance's name (default: host name)")
    s.add_argument("--job", action="append", metavar="NAME", help="only these jobs (repeatable)")
    s.add_argument(
        "--for",
        dest="duration",
        metavar="SECONDS",
        type=float,
        help="stop after this many seconds (default: run until SIGTERM)",
    )
    s.add_argument("-q", "--quiet", action="store_true", help="log warnings only")
    s.add_argument(
        "--log-format",
        choices=("text", "logfmt", "json"),
        default="text",
        help="how log lines look on stderr (under systemd: no timestamps, syslog priorities)",
    )
    s.set_defaults(handler=schedule_command)


def setup_logging(quiet: bool, log_format: str = "text") -> None:
    from lockconsole.cli import logs

    logs.setup(log_format, quiet=quiet)


def parse_slot(text: str) -> datetime:
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise UsageError(f"--slot: {text!r} is not an ISO time like 2026-11-29T02:00:00Z") from None
    if value.tzinfo is None:
        raise UsageError(f"--slot: {text!r} has no time zone (add Z or +00:00)")
    return value.astimezone(UTC)


def check_instance(given: str | None, default: str) -> str:
    """--instance (or $LOCKCONSOLE_INSTANCE): 1-255 printable characters without spaces."""
    name = default if given is None else given
    source = "--instance" if given is not None else "the instance name ($LOCKCONSOLE_INSTANCE)"
    if not name or len(name) > 255 or not name.isprintable() or any(c.isspace() for c in name):
        shown = name if len(name) <= 40 else name[:40] + "..."
        raise UsageError(
            f"{source}: {shown!r} is not an instance name (1-255 characters, no spaces)"
        )
    return name


def run_command(args: argparse.Namespace) -> int:
    """`lockconsole run JOB [-- CMD …]`: one attempt of one job."""
    from lockconsole.config.loader import load_config

    if args.slot and args.manual:
        raise UsageError("run: give --slot or --manual, not both")
    slot = parse_slot(args.slot) if args.slot else None
    config = load_config(args.config)
    job = config.job(args.job)
    target = _target(job, args.cmd)
    from lockconsole.engine.runner import default_instance

    args.instance = check_instance(args.instance, default_instance(config.instance))
    setup_logging(args.quiet, args.log_format)
    return cmd_run(config, job, target, args.instance, slot, args.manual, args.json)


def schedule_command(args: argparse.Namespace) -> int:
    """`lockconsole schedule`: fire the jobs at their cron times and serve run requests."""
    from lockconsole.config.loader import load_config

    config = load_config(args.config)
    jobs = [config.job(n) for n in args.job] if args.job else list(config.jobs.values())
    if args.duration is not None and not (math.isfinite(args.duration) and args.duration > 0):
        raise UsageError("schedule: --for takes a positive number of seconds")
    setup_logging(args.quiet, args.log_format)
    from lockconsole.engine import faultpoints
    from lockconsole.engine.runner import default_instance
    from lockconsole.engine.scheduler import Scheduler

    instance = check_instance(args.instance, default_instance(config.instance))
    from lockconsole.serving import RequestServer

    scheduler = Scheduler(config, jobs, instance=instance)
    with scheduler.signals_stop_it():  # from before the server and the sampler connect
        server = RequestServer(config, jobs, instance=instance).start()  # `lockconsole request`
        sampler = None
        every = config.ledger.journal_every
        if config.ledger.journal and every is not None and jobs:  # who holds which lock, kept
            from lockconsole.console.journal import JournalSampler

            sampler = JournalSampler(config, every.total_seconds()).start()
        try:
            faultpoints.reach(faultpoints.SCHEDULE_STARTING)
            code = scheduler.run_forever(args.duration)
        finally:
            if sampler is not None:
                sampler.stop()
            server.stop(wait=max((job.stop_grace for job in jobs), default=0.0) + 1.5)
    if getattr(args, "whole_process", False):
        _exit_now(code)
    return code


def _exit_now(code: int) -> None:
    """End the scheduler process now that every attempt holding a lock has finished.

    Attempts that were still connecting when the stop came hold nothing and are abandoned
    (daemon threads); the interpreter's clean-up could wait on them, or take long on a busy
    host, and the exit-time guarantee must not depend on it.
    """
    import os

    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _target(job: Job, cmd: list[str] | None) -> Target:
    if cmd:
        return cmd
    from lockconsole.engine.execute import target_of

    target = target_of(job)
    if target is None:
        raise UsageError(f"run: job {job.name!r} has no command or callable; give one after --")
    return target


def cmd_run(
    config: Config,
    job: Job,
    target: Target,
    instance: str | None,
    slot: datetime | None,
    manual: bool,
    as_json: bool,
) -> int:
    """One attempt. SIGTERM/SIGINT at any instant stop it: before the lock nothing is held or
    run; after, the job is stopped (or never started), the lock released, the outcome recorded.
    A stopped attempt exits 128 + the signal's number, as a process killed by it would."""
    from lockconsole.engine.commands import Command
    from lockconsole.engine.execute import run_target
    from lockconsole.engine.runner import begin, default_instance, exit_code_for
    from lockconsole.engine.stopping import Stop, Stopped, on_signals

    instance = instance or default_instance(config.instance)
    stop = Stop()
    # the supervisor's interpreter starts while we connect; it starts the job only on "go"
    # with --json our stdout carries the JSON document alone: the job's stdout goes to stderr
    stdout_fd = 2 if as_json else 1
    command = (
        None
        if callable(target)
        else Command(list(target), grace=job.stop_grace, stdout_fd=stdout_fd)
    )
    actor = None
    if manual:
        from lockconsole.backends.audit import Actor

        actor = Actor.current()

    def attempt_and_run() -> Run:
        attempt = begin(
            job,
            config.database_for(job),
            config.ledger_for(job),
            instance=instance,
            slot=slot,
            trigger="manual" if manual else "scheduled",
            stop=stop,
            actor=None if actor is None else str(actor),
        )
        if as_json and callable(target):
            with contextlib.redirect_stdout(sys.stderr):
                return run_target(attempt, target, command=command)
        return run_target(attempt, target, command=command)

    with on_signals(stop):
        if command is not None:
            command.prepare()
        try:
            if actor is None:
                run = attempt_and_run()
            else:  # a person asked: audited first (nothing runs if the row cannot be written)
                from lockconsole.backends.audit import audited_trigger

                ledger = config.ledger_for(job)
                run = audited_trigger(ledger, actor, job.name, instance, attempt_and_run)
        except Stopped as exc:
            message = f"{exc}: before the lock"
            log.warning(
                "event=stopped job=%s message=%s",
                job.name,
                json.dumps(message),
                extra={"fields": {"event": "stopped", "job": job.name, "message": message}},
            )
            return 128 + (stop.signum or 15)
        finally:
            if command is not None:
                command.discard()  # never told "go" (skipped, stopped, failed): it just ends
    if as_json:
        print(json.dumps(run_json(run, config.ledger_for(job).name)), flush=True)
    if stop.signum and run.outcome != "succeeded":
        return 128 + stop.signum
    return exit_code_for(run)


RUN_SCHEMA = 1  # the version of `run --json`'s document: a field's meaning never changes within one


def run_json(run: Run, ledger: str) -> dict[str, object]:
    """A Run as JSON-ready values (ISO times), with its schema version and its ledger's name."""
    out: dict[str, object] = {"schema": RUN_SCHEMA}
    out.update(asdict(run))
    for k, v in out.items():
        if isinstance(v, datetime):
            out[k] = v.isoformat()
    out["ledger"] = ledger
    out["run_id"] = qualified_run_id(ledger, run.id)
    return out
