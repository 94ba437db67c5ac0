"""How a listing command prints, as kubectl does: `-o wide|json|tsv`, `--no-headers`, and
`--json` (the same as `-o json`), each JSON document carrying its `schema` version.

Light on purpose: no Rich, so the commands' parsers cost nothing to build.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, is_dataclass
from datetime import datetime, timedelta
from typing import Any

from lockconsole.model.errors import UsageError

# The version of every `--json` document: a field's meaning never changes within one version;
# a field may be added. `run --json` keeps its own (cli/run.py RUN_SCHEMA), the same number.
SCHEMA = 1
FORMATS = ("wide", "json", "tsv")
LISTINGS = ("locks", "history", "audit", "dupes", "check", "holders")  # the commands that list rows
OUTPUT_HELP = (
    "wide: every column; json: one JSON object (as --json); tsv: tab-separated rows, "
    "values escaped (\\t \\n \\\\ and control characters)"
)


def add_output_options(parser: argparse.ArgumentParser, json_help: str) -> None:
    """`-o/--output`, `--no-headers` and `--json` on a listing command."""
    parser.add_argument("--json", action="store_true", help=f"{json_help} (as -o json)")
    parser.add_argument(
        "-o", "--output", choices=FORMATS, metavar="wide|json|tsv", help=OUTPUT_HELP
    )
    parser.add_argument(
        "--no-headers", action="store_true", help="print the rows without the header line"
    )


def chosen(args: argparse.Namespace) -> str:
    """The format asked for: 'table' (the default view), 'wide', 'json' or 'tsv'."""
    output = getattr(args, "output", None)
    if getattr(args, "json", False):
        if output not in (None, "json"):
            raise UsageError(f"--json and -o {output} ask for two formats; choose one")
        return "json"
    return output or "table"


def to_json(value: Any) -> Any:
    """Dataclasses, datetimes and tuples as JSON-ready values."""
    if is_dataclass(value) and not isinstance(value, type):
        return {k: to_json(v) for k, v in asdict(value).items()}
    if isinstance(value, dict):
        return {str(k): to_json(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [to_json(v) for v in value]
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, timedelta):
        return value.total_seconds()
    return value


def with_schema(document: Any) -> dict[str, Any]:
    """The document (a dict or a dataclass) as JSON-ready values, its `schema` version first."""
    return {"schema": SCHEMA, **to_json(document)}


def print_json(document: Any) -> None:
    """One JSON document on stdout, its `schema` version first; strings kept exact."""
    json.dump(with_schema(document), sys.stdout, indent=2, default=str)
    sys.stdout.write("\n")
