"""The one rule for untrusted text (safe_text) and the one password filter (urls.redact)."""

from __future__ import annotations

import io
import json
import logging
import os
import subprocess
import sys

from rich.cells import cell_len
from rich.text import Text

from lockconsole.config.urls import parse_url, redact
from lockconsole.text.safe import (
    clean,
    csv_cell,
    data_text,
    fit,
    has_unsafe,
    masked_stdio,
    pad,
    printable,
    shown,
)


def test_controls_and_bidi_become_visible_escapes() -> None:
    assert printable("a\x1b[2Jb") == "a\\x1b[2Jb"
    assert printable("\x00\x07\x08\t\n\r\x7f\x9b") == "\\x00\\x07\\x08\\x09\\x0a\\x0d\\x7f\\x9b"
    assert printable("\u202eexe.txt\u202c \u2066x\u2069") == "\\u202eexe.txt\\u202c \\u2066x\\u2069"
    assert printable("bil\u200bling\ufeff") == "bil\\u200bling\\ufeff"
    assert printable("[bold]日本語 🔒 שלום[/]") == "[bold]日本語 🔒 שלום[/]"  # text stays text
    assert printable("a\u2028b\u2029c") == "a\\u2028b\\u2029c"  # line breaks to some viewers


def test_every_control_format_and_separator_character_is_escaped() -> None:
    """The written-out class holds every Cc, Cf, Zl, Zp and Cs code point of this Python's tables,
    and nothing printable: letters, marks, spaces and emoji pass through."""
    import unicodedata

    unsafe = {"Cc", "Cf", "Zl", "Zp", "Cs"}
    missed, caught = [], []
    for code in range(0x110000):
        char = chr(code)
        escaped = has_unsafe(char)
        if unicodedata.category(char) in unsafe:
            if not escaped:
                missed.append(f"U+{code:04X}")
        elif escaped:
            caught.append(f"U+{code:04X}")
    assert not missed and not caught, (missed[:20], caught[:20])


def test_data_text_is_never_markup() -> None:
    for hostile in ("[/]", "[bold red]x", "[link=https://e.example/]y[/link]", ":skull:"):
        text = data_text(hostile)
        assert text.plain == hostile and not text.spans


def test_fit_and_pad_count_terminal_cells() -> None:
    assert fit("abcdef", 4) == "abc…"
    assert fit("日本語日本語", 5) == "日本…" and cell_len(fit("日本語日本語", 6)) <= 6
    assert cell_len(pad("日本語日本語日本語", 7)) == 7
    assert pad("ab", 4) == "ab  "
    assert fit("x" * 10_000, 80).endswith("…") and cell_len(fit("x" * 10_000, 80)) == 80


def test_clean_keeps_styles_and_escapes_the_data() -> None:
    text = Text("ok ")
    text.append("bad\x1b[31m", style="red")
    text.append(" end")
    out = clean(text)
    assert out.plain == "ok bad\\x1b[31m end"
    assert [(s.start, s.end, s.style) for s in out.spans] == [(3, 14, "red")]


def test_csv_cells_that_a_spreadsheet_would_run_are_quoted() -> None:
    for formula in ("=1+1", "+1", "-1+2", "@SUM(A1)", "\tx", "\rx"):
        assert csv_cell(formula) == "'" + formula
    assert csv_cell("plain") == "plain" and csv_cell(-5) == -5 and csv_cell(None) is None


def test_redact_masks_every_rendering_of_a_password() -> None:
    url = parse_url("postgresql://app:Hunter2pw@db:5432/x?sslpassword=KeyPhrase9&sslmode=require")
    assert "Hunter2pw" not in url.masked and "KeyPhrase9" not in url.masked
    renderings = [
        "postgresql+psycopg://app:Hunter2pw@db:5432/x",  # SQLAlchemy's rendering
        "postgresql+psycopg://app@db/x?password=Hunter2pw&sslmode=disable",
        "host=db user=app password='Hunter2pw' sslpassword=KeyPhrase9",  # libpq conninfo
        'connection failed: {"password": "Hunter2pw"}',
        'FATAL: role "Hunter2pw" does not exist',  # a server quoting it back
        "could not parse Hunter2pw%21 in 'Hunter2pw'",
        "mysql+pymysql://root:Hunter2pw@h/d",
    ]
    for text in renderings:
        assert "Hunter2pw" not in redact(text) and "KeyPhrase9" not in redact(text), text
    assert shown("pw KeyPhrase9\x1b") == "pw ***\\x1b"


def test_cli_streams_and_logs_mask_passwords(capsys) -> None:
    parse_url("mysql://root:Sw0rdf1sh@h/d")
    with masked_stdio():
        print("error: mysql://root:Sw0rdf1sh@h/d said Sw0rdf1sh")
        print("to stderr: password=Sw0rdf1sh", file=sys.stderr)
    out, err = capsys.readouterr()
    assert "Sw0rdf1sh" not in out + err and "***" in out and "***" in err
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    log = logging.getLogger("lockconsole.test")
    log.addHandler(handler)
    try:
        log.warning("could not connect: %s", "password=Sw0rdf1sh")
    finally:
        log.removeHandler(handler)
    assert "Sw0rdf1sh" not in stream.getvalue() and "password=***" in stream.getvalue()


def test_redact_masks_a_password_it_was_never_told() -> None:
    """The patterns alone mask these: a fresh interpreter where no URL was ever parsed and no
    secret remembered (within this test process, earlier tests have remembered some)."""
    code = (
        "import json, sys\n"
        "from lockconsole.config import urls\n"
        "assert not urls._secrets, urls._secrets\n"
        "print(json.dumps([urls.redact(t) for t in json.load(sys.stdin)]))\n"
    )
    renderings = [
        "postgresql://app:NeverSeen7@db:5432/x",
        "postgresql+psycopg://app@db/x?password=NeverSeen7&sslmode=disable",
        "host=db user=app password='NeverSeen7' sslpassword=NeverSeen7",
        "host=db password=NeverSeen7 dbname=x",
        'connection failed: {"password": "NeverSeen7"}',
        "mysql+pymysql://root:NeverSeen7@h/d",
        "redis://:NeverSeen7@cache:6379/0",
    ]
    done = subprocess.run(
        [sys.executable, "-c", code],
        input=json.dumps(renderings), capture_output=True, text=True, timeout=60,
        env={k: v for k, v in os.environ.items() if k != "LOCKCONSOLE_TEST_PG_URL"},
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    for before, after in zip(renderings, json.loads(done.stdout), strict=True):
        assert "NeverSeen7" not in after and "***" in after, (before, after)
