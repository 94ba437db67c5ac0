"""`lockconsole init [--url URL] [PATH]`: probe the database, write a starter lockconsole.toml.

It never overwrites: an existing PATH is refused (the file is created exclusively, so not even
a race replaces one). A bad URL is one line and exit 2; an unreachable database is one line and
nothing is written.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from lockconsole.model.errors import UsageError

DEFAULT_PATH = "lockconsole.toml"


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "init",
        help="probe a database and write a commented starter lockconsole.toml",
        description="Write a starter lockconsole.toml. With --url it probes the database "
        "first: server and version, a pooler in front, locks held now, ShedLock tables, and "
        "the grants this account lacks for viewing and releasing. Never overwrites a file.",
    )
    p.add_argument("--url", metavar="URL", help="the database to probe (${ENV} expands)")
    p.add_argument("path", nargs="?", default=DEFAULT_PATH, help=f"where (default {DEFAULT_PATH})")
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from datetime import UTC, datetime

    from lockconsole.config.urls import expand_env, parse_url
    from lockconsole.starter.template import render
    from lockconsole.text.safe import shown

    url = None
    if args.url is not None:
        try:
            url = parse_url(expand_env(args.url))
        except ValueError as exc:
            raise UsageError(f"init: --url: {exc}") from None
        if url.dialect not in ("postgresql", "mysql"):
            raise UsageError("init: --url must be a postgresql:// or mysql:// URL to probe")
    path = Path(args.path)
    if path.exists():
        raise UsageError(f"init: {args.path} exists; nothing was written (choose another PATH)")
    if not path.parent.is_dir():
        raise UsageError(f"init: the folder of {args.path} does not exist; nothing was written")
    probe = None
    if url is not None:
        from lockconsole.backends.probe import probe as probe_database

        probe = probe_database(url)
    text = render(url, probe, datetime.now(UTC), args.url)
    try:
        with open(path, "x", encoding="utf-8") as out:
            out.write(text)
    except FileExistsError:
        raise UsageError(f"init: {args.path} exists; nothing was written") from None
    os.chmod(path, 0o600 if url is not None and url.password else 0o644)
    print(shown(f"wrote {path}"))
    for line in text.splitlines():
        if line.startswith(("#   ", "# Suggested", "# the URL's")):
            print(shown(line[2:].strip()))
    return 0
