"""Run a job's target under an acquired Attempt: a command (argv) or a Python callable."""

from __future__ import annotations

import importlib
import inspect
import logging
import signal
import traceback
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from lockconsole.engine import faultpoints
from lockconsole.engine.attempt import Attempt
from lockconsole.engine.commands import Command
from lockconsole.engine.stopping import handling
from lockconsole.model.errors import ConfigError
from lockconsole.model.jobs import Job, Run

log = logging.getLogger(__name__)

Target = Sequence[str] | Callable[..., Any]


class JobInterrupted(BaseException):
    """Raised inside a callable job when the runner gets SIGTERM or SIGINT."""


def resolve_callable(spec: str) -> Callable[..., Any]:
    """'package.module:function' -> the function (a ConfigError if it cannot be imported)."""
    module_name, _, attr = spec.partition(":")
    try:
        target: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            target = getattr(target, part)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"cannot load callable {spec!r}: {exc}") from None
    if not callable(target):
        raise ConfigError(f"{spec!r} is not callable")
    return target


def target_of(job: Job) -> Target | None:
    """What a job runs: its command, or its callable (imported now); None when it has neither."""
    if job.command:
        return list(job.command)
    if job.callable:
        return resolve_callable(job.callable)
    return None


def run_target(
    attempt: Attempt,
    target: Target,
    *,
    handle_signals: bool = True,
    output: Callable[[str], None] | None = None,
    command: Command | None = None,
) -> Run:
    """Run `target` while the attempt holds the lock; record and return the finished Run.

    `output` receives a command's output line by line (default: it goes to our stdout and
    stderr). The tail of a command's output, or a callable's exception and traceback, is kept
    in the run ledger with the outcome. `command` is the target's Command, prepared (its
    supervisor started) before the lock.
    """
    if not attempt.acquired:
        return attempt.run
    if callable(target):
        done = _run_callable(attempt, target, handle_signals)
    else:
        done = _run_command(attempt, list(target), handle_signals, output, command)
    _rerun_abandoned(attempt, target, handle_signals, output)
    return done


def _rerun_abandoned(
    attempt: Attempt, target: Target, handle_signals: bool, output: Callable[[str], None] | None
) -> None:
    """rerun_abandoned: each earlier slot the attempt closed as abandoned, run again in turn
    under the lock (a fresh attempt, trigger "rerun", once_per_slot asked as for any slot)."""
    if attempt.rerun is None:
        return
    for slot in attempt.reruns:
        if attempt.stop.is_set():
            return
        try:
            again = attempt.rerun(slot)
        except Exception as exc:  # one slot's trouble leaves the rest for the next attempt
            log.warning("rerun of %s slot %s: %s", attempt.job.name, slot.isoformat(), exc)
            return
        run_target(again, target, handle_signals=handle_signals, output=output)


def _run_command(
    attempt: Attempt,
    argv: list[str],
    handle_signals: bool,
    output: Callable[[str], None] | None = None,
    prepared: Command | None = None,
) -> Run:
    job = attempt.job
    command = prepared or Command(argv, output=output, grace=job.stop_grace)

    def on_lost(_attempt: Attempt) -> None:
        command.stop("lock lost", job.stop_grace)

    # both are sticky: a stop or a loss that came before these lines is acted on here
    attempt.on_lock_lost.append(on_lost)
    if attempt.lost.is_set():
        on_lost(attempt)
    attempt.stop_request().on_request(lambda reason: command.stop(reason, job.stop_grace))

    def on_signal(signum: int, _frame: object) -> None:
        attempt.request_stop(f"stopped by {signal.Signals(signum).name}", signum)

    with _signals(on_signal if handle_signals else None):
        command.start(attempt.context.environment())
        code = command.wait() if command.proc is not None else None
    faultpoints.reach(faultpoints.BEFORE_RECORD)
    attempt.output, attempt.output_cut = command.tail.text()
    if command.start_error:
        return attempt.finish("failed", exit_code=127, message=command.start_error)
    if not command.job_started:
        return attempt.finish("failed", message=f"{command.stop_reason}: before the job started")
    if code == 0 and not command.stop_reason:
        return attempt.finish("succeeded", exit_code=0)
    message = command.stop_reason or f"exited with code {code}"
    return attempt.finish("failed", exit_code=code, message=message)


def _run_callable(attempt: Attempt, fn: Callable[..., Any], handle_signals: bool) -> Run:
    running = [True]

    def on_signal(signum: int, _frame: object) -> None:
        reason = f"stopped by {signal.Signals(signum).name}"
        attempt.request_stop(reason, signum)
        if running[0]:
            raise JobInterrupted(reason)

    takes_attempt = _accepts_argument(fn)
    outcome, code, message = "succeeded", 0, None
    with _signals(on_signal if handle_signals else None):
        try:
            if attempt.stop.is_set():
                raise JobInterrupted(f"{attempt.stop_request().reason}: before the job started")
            fn(attempt) if takes_attempt else fn()
        except JobInterrupted as exc:
            outcome, code, message = "failed", 130, str(exc)
            attempt.output = traceback.format_exc()
        except Exception as exc:
            outcome, code, message = "failed", 1, f"{type(exc).__name__}: {exc}"
            attempt.output = traceback.format_exc()
        finally:
            running[0] = False
    return attempt.finish(outcome, exit_code=code, message=message)


def _accepts_argument(fn: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(
        p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
        and p.default is p.empty
        for p in params
    )


@contextmanager
def _signals(handler: Callable[[int, object], None] | None) -> Iterator[None]:
    """Install `handler` for SIGTERM and SIGINT while the job runs (main thread only)."""
    if handler is None:
        yield
        return
    with handling((signal.SIGTERM, signal.SIGINT), handler):
        yield
