"""Load the SQL kept in `lockconsole/backends/queries/*.sql`, by name, cached."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

from lockconsole.model.jobs import RUN_COLUMNS

QUERIES = Path(__file__).parent / "queries"
_PYFORMAT = re.compile(r"%\((\w+)\)s")
# a fragment placed in a statement: `{name:argument}`, on a line of its own or with text around it
_FRAGMENT = re.compile(
    r"^(?P<indent>[ \t]*)(?P<before>.*?)\{(?P<name>held_advisory_lock):(?P<arg>[^}]+)\}", re.M
)
_RESERVED = frozenset({"trigger"})  # column names that must be quoted in SQL
# columns a statement decides itself (decide_run: from its CTE `decided`), not given as parameters
DECIDED = ("outcome", "finished_at", "message", "session_id", "fencing_token")
# decide_run_mysql's values of them: its user variables and expressions, not a derived table
# (MariaDB spends about 0.2 ms planning a subquery in FROM, more than the INSERT itself costs)
_DECIDED_MYSQL = {
    "outcome": "@lc_outcome",
    "finished_at": "IF(@lc_outcome = 'skipped', %(finished_at)s, NULL)",
    "message": "@lc_message",
    "session_id": "CONNECTION_ID()",
    "fencing_token": "%(fencing_token)s",
}


def _quoted(name: str, dialect: str | None) -> str:
    if name not in _RESERVED:
        return name
    return f"`{name}`" if dialect == "mysql" else f'"{name}"'


def run_column_lists(dialect: str | None) -> dict[str, str]:
    """The run ledger's column lists, from RUN_COLUMNS, for the `{run_*}` placeholders."""
    names = [column.name for column in RUN_COLUMNS]
    inserted = [column.name for column in RUN_COLUMNS if column.type != "id"]
    decided = _DECIDED_MYSQL if dialect == "mysql" else {n: f"decided.{n}" for n in DECIDED}
    return {
        "{run_columns}": ", ".join(_quoted(name, dialect) for name in names),
        "{run_insert_columns}": ", ".join(_quoted(name, dialect) for name in inserted),
        "{run_insert_values}": ", ".join(f"%({name})s" for name in inserted),
        "{run_insert_decided}": ", ".join(
            decided[name] if name in DECIDED else f"%({name})s" for name in inserted
        ),
    }


def _fragments(text: str) -> str:
    """`text` with each `{fragment:argument}` replaced by that fragment's file, its `{pid}` the
    argument, its lines after the first indented as the placeholder's line is."""

    def placed(match: re.Match[str]) -> str:
        fragment = load(match["name"]).replace("{pid}", match["arg"])
        indent = match["indent"]
        lines = fragment.splitlines()
        return (
            indent + match["before"] + "\n".join([lines[0], *(indent + line for line in lines[1:])])
        )

    return _FRAGMENT.sub(placed, text)


@cache
def load(name: str, dialect: str | None = None) -> str:
    """The text of `name.sql`, preferring `name_<dialect>.sql` when it exists.

    Queries are written with %(param)s placeholders (psycopg, PyMySQL); for SQLite they are
    rewritten to :param. `{run_columns}`, `{run_insert_columns}`, `{run_insert_values}` and
    `{run_insert_decided}` are the run ledger's column lists (see `run_column_lists`).
    """
    candidates = [f"{name}_{dialect}.sql"] if dialect else []
    candidates.append(f"{name}.sql")
    for candidate in candidates:
        path = QUERIES / candidate
        if path.is_file():
            lines = path.read_text(encoding="utf-8").strip().splitlines()
            while lines and lines[0].lstrip().startswith("--"):  # header comments stay local
                lines.pop(0)
            text = "\n".join(lines).strip().rstrip(";")
            if "{held_advisory_lock:" in text:
                text = _fragments(text)
            if "{run_" in text:
                for placeholder, columns in run_column_lists(dialect).items():
                    text = text.replace(placeholder, columns)
            if dialect == "sqlite":
                text = _PYFORMAT.sub(r":\1", text)
            return text
    raise FileNotFoundError(f"no query file {name}.sql in {QUERIES}")
