"""The `lockconsole` command: argparse subcommands, each importing only what it needs."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from lockconsole import __version__
from lockconsole.model.errors import ConfigError, LockconsoleError, UsageError

if TYPE_CHECKING:
    from lockconsole.model.jobs import Job

EXIT_OK = 0
EXIT_USAGE = 2
EXIT_BROKEN_PIPE = 141  # what a shell reports for a writer ended by SIGPIPE (128 + 13)


class _Parser(argparse.ArgumentParser):
    """argparse that raises UsageError (one line, exit 2) instead of printing usage."""

    def error(self, message: str) -> NoReturn:
        where = self.prog.removeprefix("lockconsole").strip()  # "config", "run", or ""
        where = f"{where}: " if where else ""
        raise UsageError(f"{where}{message} (see lockconsole --help)")


RUN_PATH_COMMANDS = ("run", "schedule")  # their parser is built without the other commands
# Commands that change a database (run a job, write the ledger, end a session, build a demo):
# refused under --read-only before any configuration is read or any connection is opened.
MUTATING_COMMANDS = ("run", "schedule", "release", "demo", "pause", "resume", "request")
READ_ONLY_HELP = (
    "refuse every mutation (run, schedule, release, pause, resume, demo, prune without "
    "--dry-run, the console's actions)"
)


def command_word(argv: Sequence[str]) -> str | None:
    """The subcommand argv names (the first word that is not a global option), or None."""
    value_follows = False
    for token in argv:
        if value_follows:
            value_follows = False
        elif token == "--config":
            value_follows = True
        elif not token.startswith("-"):
            return token
    return None


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The whole parser; for `run` and `schedule` (cron's cold start) only what they need."""
    from lockconsole.config.loader import SEARCH_ORDER_HELP

    parser = _Parser(
        prog="lockconsole",
        description="Run a job scheduled on every instance exactly once, and steer it.",
        epilog=f"Configuration is looked up in this order: {SEARCH_ORDER_HELP}.",
    )
    parser.add_argument("--version", action="version", version=f"lockconsole {__version__}")
    parser.add_argument("--config", metavar="PATH", help="the lockconsole.toml to use")
    parser.add_argument("--read-only", action="store_true", help=READ_ONLY_HELP)
    sub = parser.add_subparsers(dest="command", parser_class=_Parser)

    t = sub.add_parser("tui", help="open the console (the default when no command is given)")
    t.set_defaults(handler=cmd_tui)
    p = sub.add_parser("config", help="check the configuration and show what it resolves to")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(handler=cmd_config)
    from lockconsole.cli import run as cli_run

    cli_run.add_parsers(sub)
    if command not in RUN_PATH_COMMANDS:
        from lockconsole.cli import views as cli_views

        cli_views.add_parsers(sub)
        from lockconsole.cli import incidents as cli_incidents

        cli_incidents.add_parsers(sub)
        from lockconsole.cli import steering

        steering.add_parsers(sub)
        from lockconsole.demo import cli as demo_cli

        demo_cli.add_parser(sub)
        _add_plugged(sub, parser)
    for subparser in sub.choices.values():  # --read-only after the command word too
        subparser.add_argument(
            "--read-only", action="store_true", default=argparse.SUPPRESS, help=READ_ONLY_HELP
        )
    return parser


def _add_plugged(sub: argparse._SubParsersAction, parser: argparse.ArgumentParser) -> None:
    """The commands of the other layers (metrics, init, completion, prune)."""
    from lockconsole.cli import completion
    from lockconsole.cli import prune as cli_prune
    from lockconsole.metrics import command as metrics_command
    from lockconsole.starter import command as init_command

    metrics_command.add_parser(sub)
    init_command.add_parser(sub)
    completion.add_parser(sub, parser)
    cli_prune.add_parser(sub)


def main(argv: Sequence[str] | None = None) -> int:
    whole_process = argv is None  # the `lockconsole` program itself, not a caller in Python
    argv = list(sys.argv[1:] if argv is None else argv)
    command: list[str] = []
    if "--" in argv:  # everything after -- is the job's command, untouched by argparse
        split = argv.index("--")
        argv, command = argv[:split], argv[split + 1 :]
    from lockconsole.config.urls import remember_environment
    from lockconsole.text.safe import masked_stdio

    remember_environment()  # a secret variable's value is masked like a password
    try:
        with masked_stdio():  # every password masked in whatever this command prints
            code = _main(argv, command, whole_process)
            sys.stdout.flush()
            return code
    except BrokenPipeError:  # the reader went away (`| head`): end quietly, as cat does
        _silence_stdout()
        return EXIT_BROKEN_PIPE


def _silence_stdout() -> None:
    """Point stdout at /dev/null so the interpreter's final flush cannot fail again."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError):  # no real stdout to silence
        pass


def _main(argv: list[str], command: list[str], whole_process: bool) -> int:
    try:
        args = build_parser(command_word(argv)).parse_args(argv)
        args.cmd = command
        args.whole_process = whole_process
        if command and args.command != "run":
            raise UsageError("lockconsole: only 'run' takes a command after --")
        if args.read_only and args.command in MUTATING_COMMANDS:
            raise UsageError(f"{args.command} refused: --read-only is set; nothing was done")
        handler = getattr(args, "handler", cmd_tui)  # every command sets its own; none: tui
        return int(handler(args))
    except ConfigError as exc:
        _report(exc)
        return EXIT_USAGE
    except LockconsoleError as exc:
        _report(exc)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130


def cmd_tui(args: argparse.Namespace) -> int:
    """`lockconsole` / `lockconsole tui`: the console, on a terminal only."""
    if not (sys.stdin.isatty() and sys.stdout.isatty()):
        raise UsageError(
            "the console needs a terminal; in scripts choose a command (see lockconsole --help)"
        )
    from lockconsole.tui.app import run_console

    return run_console(args.config, read_only=args.read_only)


def _report(exc: BaseException) -> None:
    """The one line an operator sees for an error: no traceback, no line breaks."""
    from lockconsole.text.safe import shown

    text = " ".join(line.strip() for line in str(exc).splitlines()) or type(exc).__name__
    print(f"lockconsole: {shown(text)}", file=sys.stderr)


def job_document(job: Job) -> dict[str, Any]:
    """Every field of a job as `config --json` shows it, built from the model: a duration as
    `<field>_s` seconds, the lock key as its text, kind and what it was derived from."""
    from dataclasses import asdict, fields, is_dataclass

    out: dict[str, Any] = {}
    for spec in fields(job):
        value = getattr(job, spec.name)
        if spec.name == "name":
            continue
        if spec.name == "key":
            out.update(key=str(value), key_kind=value.kind, key_derived_from=value.derived_from)
        elif "timedelta" in str(spec.type):  # the annotation, as text (postponed annotations)
            out[f"{spec.name}_s"] = value.total_seconds() if value is not None else None
        elif is_dataclass(value) and not isinstance(value, type):
            out[spec.name] = asdict(value)
        else:
            out[spec.name] = list(value) if isinstance(value, tuple) else value
    out["lock_check_timeout"] = job.check_timeout  # unset: the one its watchdog_interval gives
    return out


def cmd_config(args: argparse.Namespace) -> int:
    from lockconsole.config.loader import load_config

    config = load_config(args.config)
    data = {
        "path": config.path,
        "databases": {n: d.url.masked for n, d in config.databases.items()},
        "ledger_database": config.ledger_database,
        "retention_s": config.retention.total_seconds() if config.retention else None,
        "jobs": {name: job_document(job) for name, job in config.jobs.items()},
    }
    if args.json:
        from lockconsole.cli.output import with_schema

        print(json.dumps(with_schema(data), indent=2))
        return EXIT_OK
    from lockconsole.text.safe import shown

    print(shown(f"config: {config.path}"))
    for name, database in config.databases.items():
        print(shown(f"database {name}: {database.url.masked}"))
    for name, job in config.jobs.items():
        print(
            shown(
                f"job {name}: {job.strategy} key={job.key} db={job.database} "
                f"schedule={job.schedule or '-'} ({job.timezone})"
                + (" ledger_commit=async" if job.ledger_commit == "async" else "")
                + (f" lock_group={job.lock_group}" if job.lock_group else "")
            )
        )
    return EXIT_OK
