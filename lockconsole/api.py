"""`run_once`: the Python API, as a context manager and as a decorator.

    from lockconsole import run_once

    with run_once("nightly_billing") as run:      # job from lockconsole.toml
        if run.acquired:
            bill_everyone(stop=run.lost)

    @run_once("nightly_billing")
    def nightly_billing(): ...                    # returns None when another instance has it

    run_once("reindex", url="postgresql://app@db/app", strategy="pg-xact")  # no config file

A skip never raises. If the lock is lost while the body runs, `run.lost` is set and
`on_lock_lost` is called; the attempt is recorded as lock_lost.

KeyboardInterrupt, SystemExit or SIGTERM never leave a lock held or an attempt "acquired":
an exception out of the body is recorded (failed, with its traceback kept as the run's output,
passwords masked) and the lock released before it goes on;
SIGINT and SIGTERM that arrive while the lock is taken or given back are held until that step
is done (a SIGINT while connecting ends the connect at once), then delivered as usual.

Repeated attempts in one process reuse their lock and ledger connections
(`lockconsole.engine.sessions`): a connection is kept between attempts only after a clean release,
never while it holds a lock. `reuse_connections=False` opens and closes both per attempt.
"""

from __future__ import annotations

import functools
import traceback
from collections.abc import Callable
from datetime import datetime, timedelta
from types import TracebackType
from typing import TYPE_CHECKING, Any

from lockconsole.config.loader import Config, load_config, parse_config
from lockconsole.model.jobs import Database, Job, Trigger

if TYPE_CHECKING:
    from lockconsole.engine.runner import Attempt


class run_once:  # noqa: N801 - reads as a verb at the call site
    """Run the body (or the decorated function) only if this instance gets the job's lock."""

    def __init__(
        self,
        job: str,
        *,
        config: Config | str | None = None,
        url: str | None = None,
        strategy: str | None = None,
        key: int | str | tuple[int, int] | None = None,
        instance: str | None = None,
        slot: datetime | None = None,
        trigger: Trigger = "scheduled",
        on_lock_lost: Callable[[Attempt], None] | None = None,
        watchdog_interval: float | None = None,
        max_duration: timedelta | None = None,
        reuse_connections: bool = True,
    ) -> None:
        self.job_name = job
        self._config_arg, self._url = config, url
        self._strategy, self._key = strategy, key
        self.instance, self.slot, self.trigger = instance, slot, trigger
        self.on_lock_lost = on_lock_lost
        self.watchdog_interval, self.max_duration = watchdog_interval, max_duration
        self.reuse_connections = reuse_connections
        self.attempt: Attempt | None = None

    def _resolve(self) -> tuple[Config, Job, Database, Database]:
        if self._url is not None:
            config = _adhoc_config(self.job_name, self._url, strategy=self._strategy, key=self._key)
        elif isinstance(self._config_arg, Config):
            config = self._config_arg
        else:
            config = load_config(self._config_arg)
        job = config.job(self.job_name)
        changes: dict[str, Any] = {}
        if self.watchdog_interval is not None:
            changes["watchdog_interval"] = self.watchdog_interval
        if self.max_duration is not None:
            changes["max_duration"] = self.max_duration
        if changes:
            from dataclasses import replace

            job = replace(job, **changes)
        return config, job, config.database_for(job), config.ledger_for(job)

    def __enter__(self) -> Attempt:
        runner, sessions_module, stopping = _ENGINE or _engine()
        config, job, database, ledger_db = self._resolve()
        instance = self.instance or runner.default_instance(config.instance)
        sessions = sessions_module.REGISTRY if self.reuse_connections else None
        stop = stopping.Stop()
        with stopping.holding_signals(stop):  # a signal here is delivered once nothing is half done
            attempt = self.attempt = runner.begin(
                job,
                database,
                ledger_db,
                instance=instance,
                slot=self.slot,
                trigger=self.trigger,
                sessions=sessions,
                stop=stop,
            )
        if self.on_lock_lost is not None:
            attempt.on_lock_lost.append(self.on_lock_lost)
        return attempt

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        attempt = self.attempt
        if attempt is None or not attempt.acquired:
            return
        stopping = (_ENGINE or _engine())[2]
        with stopping.holding_signals():  # record and release first; a signal is delivered after
            if exc is None:
                attempt.finish("succeeded", exit_code=0)
            else:
                code, message = _interruption(exc)
                # the exception and its traceback, kept (masked, its tail) with the outcome
                attempt.output = "".join(traceback.format_exception(exc_type, exc, tb))
                attempt.finish("failed", exit_code=code, message=message)

    def __call__(self, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            with run_once(
                self.job_name,
                config=self._config_arg,
                url=self._url,
                strategy=self._strategy,
                key=self._key,
                instance=self.instance,
                slot=self.slot,
                trigger=self.trigger,
                on_lock_lost=self.on_lock_lost,
                watchdog_interval=self.watchdog_interval,
                max_duration=self.max_duration,
                reuse_connections=self.reuse_connections,
            ) as attempt:
                if not attempt.acquired:
                    return None
                return fn(*args, **kwargs)

        return wrapper


_ENGINE: list[Any] = []  # engine.runner, engine.sessions, engine.stopping, once imported


def _engine() -> list[Any]:
    """The engine's modules, imported on the first attempt (importing lockconsole stays light);
    kept, so an attempt does not pay three import statements."""
    from lockconsole.engine import runner, sessions, stopping

    _ENGINE[:] = [runner, sessions, stopping]
    return _ENGINE


def _interruption(exc: BaseException) -> tuple[int, str]:
    """The exit code and message recorded for an exception out of the body."""
    if isinstance(exc, KeyboardInterrupt):
        return 130, "interrupted by KeyboardInterrupt"
    if isinstance(exc, SystemExit):
        code = exc.code if isinstance(exc.code, int) else 1
        return code or 1, f"interrupted by SystemExit({exc.code!r})"
    return 1, f"{type(exc).__name__}: {exc}"


def _adhoc_config(
    job: str, url: str, *, strategy: str | None, key: int | str | tuple[int, int] | None
) -> Config:
    """A one-job Config built from keyword arguments, checked like a file."""
    import json

    lines = [
        "[databases.main]",
        f"url = {json.dumps(url)}",
        f"[jobs.{json.dumps(job)}]",
        'database = "main"',
    ]
    if strategy is not None:
        lines.append(f"strategy = {json.dumps(strategy)}")
    if key is not None:
        lines.append(f"key = {json.dumps(list(key) if isinstance(key, tuple) else key)}")
    return parse_config("\n".join(lines), "<run_once arguments>")
