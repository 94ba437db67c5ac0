"""Control characters made visible, with nothing heavier than `re`: the run path's logs use it.

    printable("a\\x1b[2Jb")  -> 'a\\\\x1b[2Jb'   (a backslash, then x1b: inert)

`text/safe.py` builds the rest of the untrusted-text rule (masking, Rich Text, cells) on it.
"""

from __future__ import annotations

import re

__all__ = ["has_unsafe", "printable", "printable_lines"]

# Every character of the Unicode categories Cc (controls: C0, DEL, C1; tab and newline too,
# since a cell is one line), Cf (format: bidi embeddings, overrides, isolates and marks that
# reorder what the terminal shows, zero-width spaces and joiners, soft hyphen, BOM, tags),
# Zl and Zp (U+2028 LINE and U+2029 PARAGRAPH SEPARATOR, which some terminals and log viewers
# break lines on) and Cs (lone surrogates, from bytes decoded with surrogateescape). Written out
# rather than built from `unicodedata` at import (a scan of 1.1 million code points costs the
# run path ~0.3 s); tests/unit/text/test_safe_text.py checks it against the running Python's tables.
_UNSAFE = re.compile(
    "[\x00-\x1f\x7f-\x9f\xad\u0600-\u0605\u061c\u06dd\u070f\u0890-\u0891\u08e2\u180e"
    "\u200b-\u200f\u2028-\u202e\u2060-\u2064\u2066-\u206f\ud800-\udfff\ufeff\ufff9-\ufffb"
    "\U000110bd\U000110cd\U00013430-\U00013438\U0001bca0-\U0001bca3\U0001d173-\U0001d17a"
    "\U000e0001\U000e0020-\U000e007f]"
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
