"""`lockconsole completion bash|zsh`: a shell completion script, generated from the parser.

lockconsole completion bash > ~/.local/share/bash-completion/completions/lockconsole
lockconsole completion zsh > "${fpath[1]}/_lockconsole"

Job names, database names and recent run ids come from the configuration the shell's
`lockconsole` finds (`$LOCKCONSOLE_CONFIG` or the search path) when Tab is pressed: the script
asks `lockconsole completion --names jobs|databases|runs`, which prints one per line and nothing
(exit 0) when there is no configuration or a ledger cannot be read.
"""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from functools import partial
from typing import Any

SHELLS = ("bash", "zsh")
NAMES = ("jobs", "databases", "runs")
# an argument's dest -> the names it completes; every subcommand is walked, none is edited
COMPLETES = {"job": "jobs", "database": "databases", "run_id": "runs"}
RECENT_RUNS = 20  # run ids offered per ledger, newest first


def add_parser(sub: argparse._SubParsersAction, root: argparse.ArgumentParser) -> None:
    """The `completion` subcommand; `root` is the whole parser the script completes."""
    p = sub.add_parser(
        "completion",
        help="print a bash or zsh completion script for lockconsole",
        description="Print a completion script. bash: lockconsole completion bash > "
        "~/.local/share/bash-completion/completions/lockconsole; zsh: lockconsole "
        'completion zsh > "${fpath[1]}/_lockconsole".',
    )
    p.add_argument("shell", nargs="?", choices=SHELLS, help="the shell to complete in")
    p.add_argument("--names", choices=NAMES, help=argparse.SUPPRESS)  # what the script asks
    p.set_defaults(handler=partial(run, root))


def run(root: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    from lockconsole.model.errors import UsageError

    if args.names:
        for name in _names(args.names, getattr(args, "config", None)):
            print(name)
        return 0
    if args.shell is None:
        raise UsageError("completion: name the shell: bash or zsh")
    import shtab

    for action in _actions(root):
        names = COMPLETES.get(action.dest)
        if names is not None and not action.choices:
            action.complete = shtab.cmd(  # type: ignore[attr-defined]
                f"lockconsole completion --names {names} 2>/dev/null"
            )
    print(shtab.complete(root, shell=args.shell))
    return 0


def _actions(parser: argparse.ArgumentParser) -> Iterator[argparse.Action]:
    for action in parser._actions:
        yield action
        if isinstance(action, argparse._SubParsersAction):
            for child in set(action.choices.values()):
                yield from _actions(child)


def _names(kind: str, config_path: Any) -> list[str]:
    """The names to offer; none (never an error) when the configuration cannot be read."""
    from lockconsole.config.loader import load_config

    try:
        config = load_config(config_path)
    except Exception:
        return []
    if kind == "jobs":
        return sorted(config.jobs)
    if kind == "databases":
        return sorted(config.databases)
    return _recent_runs(config)


def _recent_runs(config: Any) -> list[str]:
    """The newest run ids of every ledger, qualified (`billing:42`), read within seconds."""
    from lockconsole.backends.connect import Timeouts
    from lockconsole.backends.ledger.store import Ledger
    from lockconsole.model.context import qualified_run_id

    ledgers = {config.ledger_for(job).name: config.ledger_for(job) for job in config.jobs.values()}
    found: list[str] = []
    for name, database in sorted(ledgers.items()):
        try:
            with Ledger(database, timeouts=Timeouts(connect=2.0, statement=2.0)) as ledger:
                runs = ledger.runs(limit=RECENT_RUNS)
        except Exception:  # a ledger away or not made yet: offer the others
            continue
        found.extend(str(qualified_run_id(name, r.id)) for r in runs if r.id is not None)
    return found
