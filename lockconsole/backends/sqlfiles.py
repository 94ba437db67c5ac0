"""Load the SQL kept in `lockconsole/backends/queries/*.sql`, by name, cached."""

from __future__ import annotations

import re
from functools import cache
from pathlib import Path

QUERIES = Path(__file__).parent / "queries"
_PYFORMAT = re.compile(r"%\((\w+)\)s")


@cache
def load(name: str, dialect: str | None = None) -> str:
    """The text of `name.sql`, preferring `name_<dialect>.sql` when it exists.

    Queries are written with %(param)s placeholders (psycopg, PyMySQL); for SQLite they are
    rewritten to :param.
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
            if dialect == "sqlite":
                text = _PYFORMAT.sub(r":\1", text)
            return text
    raise FileNotFoundError(f"no query file {name}.sql in {QUERIES}")
