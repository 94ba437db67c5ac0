"""`lockconsole completion bash|zsh`: a shell completion script, generated from the parser.

lockconsole completion bash > ~/.local/share/bash-completion/completions/lockconsole
lockconsole completion zsh > "${fpath[1]}/_lockconsole"
"""

from __future__ import annotations

import argparse
from functools import partial

SHELLS = ("bash", "zsh")


def add_parser(sub: argparse._SubParsersAction, root: argparse.ArgumentParser) -> None:
    """The `completion` subcommand; `root` is the whole parser the script completes."""
    p = sub.add_parser(
        "completion",
        help="print a bash or zsh completion script for lockconsole",
        description="Print a completion script. bash: lockconsole completion bash > "
        "~/.local/share/bash-completion/completions/lockconsole; zsh: lockconsole "
        'completion zsh > "${fpath[1]}/_lockconsole".',
    )
    p.add_argument("shell", choices=SHELLS, help="the shell to complete in")
    p.set_defaults(handler=partial(run, root))


def run(root: argparse.ArgumentParser, args: argparse.Namespace) -> int:
    import shtab

    print(shtab.complete(root, shell=args.shell))
    return 0
