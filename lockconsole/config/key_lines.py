"""Where a key stands in a TOML file, so every config error can name its line."""

from __future__ import annotations

import re


def locate(lines: list[str], table: tuple[str, ...], key: str | None) -> int | None:
    """The line of `key` inside `[table]` (or of the header, or of a dotted key)."""
    want = ".".join(table)
    target = ".".join((*table, key)) if key is not None else None
    current = ""
    header_line = sub_header_line = None
    for number, line in enumerate(lines, 1):
        stripped = line.strip()
        m = re.match(r"^\[\[?\s*([^\[\]]+?)\s*\]\]?\s*(#.*)?$", stripped)
        if m:
            current = re.sub(r"\s*\.\s*", ".", m.group(1)).replace('"', "").replace("'", "")
            if current == want and header_line is None:
                header_line = number
            if target and sub_header_line is None and f"{current}.".startswith(f"{target}."):
                sub_header_line = number  # [jobs.x] when the error is about `jobs.x`
            continue
        if target is None:
            continue
        m = re.match(r"^([A-Za-z0-9_\"'.\- ]+?)\s*=", stripped)
        if not m:
            continue
        full = ".".join(filter(None, [current, m.group(1).replace('"', "").replace("'", "")]))
        if re.sub(r"\s*\.\s*", ".", full) == target:
            return number
    if sub_header_line is not None:
        return sub_header_line
    if header_line is None and table:
        return locate(lines, table[:-1], table[-1])  # an inline table: its key's line
    return header_line
