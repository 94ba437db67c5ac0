"""Run a job's target under an acquired Attempt: a command (argv) or a Python callable."""

from __future__ import annotations

import importlib
import inspect
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from .commands import Command
from .errors import ConfigError
from .models import Run
from .runner import Attempt

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


def run_target(attempt: Attempt, target: Target, *, handle_signals: bool = True,
               output: Callable[[str], None] | None = None) -> Run:  # fmt: skip
    """Run `target` while the attempt holds the lock; record and return the finished Run.

    `output` receives a command's output line by line (default: it goes to our stdout).
    """
    if not attempt.acquired:
        return attempt.run
    if callable(target):
        return _run_callable(attempt, target, handle_signals)
    return _run_command(attempt, list(target), handle_signals, output)


def _run_command(attempt: Attempt, argv: list[str], handle_signals: bool,
                 output: Callable[[str], None] | None = None) -> Run:  # fmt: skip
    job = attempt.job
    command = Command(argv, output=output)
    attempt.on_lock_lost.append(lambda _a: command.stop("lock lost", job.stop_grace))
    attempt.on_stop.append(lambda reason: command.stop(reason, job.stop_grace))

    def on_signal(signum: int, _frame: object) -> None:
        attempt.request_stop(f"stopped by {signal.Signals(signum).name}")

    with _signals(on_signal if handle_signals else None):
        try:
            command.start()
        except OSError as exc:
            start_error = f"cannot start {argv[0]}: {exc}"
        else:
            start_error = None
            if attempt.lost.is_set():  # lost before its callback could stop a started command
                command.stop("lock lost", job.stop_grace)
            code = command.wait()
    if start_error:
        return attempt.finish("failed", exit_code=127, message=start_error)
    if code == 0 and not command.stop_reason:
        return attempt.finish("succeeded", exit_code=0)
    message = command.stop_reason or f"exited with code {code}"
    return attempt.finish("failed", exit_code=code, message=message)


def _run_callable(attempt: Attempt, fn: Callable[..., Any], handle_signals: bool) -> Run:
    running = [True]

    def on_signal(signum: int, _frame: object) -> None:
        attempt.stop.set()
        if running[0]:
            raise JobInterrupted(f"stopped by {signal.Signals(signum).name}")

    takes_attempt = _accepts_argument(fn)
    outcome, code, message = "succeeded", 0, None
    with _signals(on_signal if handle_signals else None):
        try:
            fn(attempt) if takes_attempt else fn()
        except JobInterrupted as exc:
            outcome, code, message = "failed", 130, str(exc)
        except Exception as exc:
            outcome, code, message = "failed", 1, f"{type(exc).__name__}: {exc}"
        finally:
            running[0] = False
    return attempt.finish(outcome, exit_code=code, message=message)


def _accepts_argument(fn: Callable[..., Any]) -> bool:
    try:
        params = inspect.signature(fn).parameters.values()
    except (TypeError, ValueError):
        return False
    return any(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD, p.VAR_POSITIONAL)
               and p.default is p.empty for p in params)  # fmt: skip


@contextmanager
def _signals(handler: Callable[[int, object], None] | None) -> Iterator[None]:
    """Install `handler` for SIGTERM and SIGINT while the job runs (main thread only)."""
    if handler is None or threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {s: signal.signal(s, handler) for s in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for s, h in previous.items():
            signal.signal(s, h)
