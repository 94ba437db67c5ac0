"""Control characters made visible, with nothing heavier than `re`: the run path's logs use it.

    printable("a\\x1b[2Jb")  -> 'a\\\\x1b[2Jb'   (a backslash, then x1b: inert)

`text/safe.py` builds the rest of the untrusted-text rule (masking, Rich Text, cells) on it.
"""

from __future__ import annotations

import re

__all__ = ["has_unsafe", "printable", "printable_lines"]

# C0 controls (tab and newline too: a cell is one line), DEL, C1 controls, the bidi
# embeddings, overrides and isolates that reorder what the terminal shows, and the other
# invisible format characters (zero-width spaces and joiners, bidi marks, soft hyphen, BOM,
# tags): they hide in a name an operator must recognise, and terminals disagree on their width.
_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\u00ad\u0600-\u0605\u061c\u06dd\u070f\u180e\u200b-\u200f"
    "\u202a-\u202e\u2060-\u2064\u2066-\u206f\ufeff\ufff9-\ufffb\U000e0001\U000e0020-\U000e007f]"
)


def _escape(m: re.Match[str]) -> str:
    code = ord(m.group())
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def printable(text: object) -> str:
    """`text` with every control character and bidi override shown as a visible escape."""
    s = text if isinstance(text, str) else str(text)
    return _UNSAFE.sub(_escape, s)


def printable_lines(text: object) -> str:
    """Like printable(), but line breaks stay line breaks (multi-line details, DDL)."""
    s = text if isinstance(text, str) else str(text)
    return "\n".join(printable(line) for line in s.split("\n"))


def has_unsafe(text: str) -> bool:
    """True when `text` holds a character printable() would escape."""
    return _UNSAFE.search(text) is not None
