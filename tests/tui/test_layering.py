"""Only lockconsole.tui imports Textual: the core and the non-TUI CLI never pay for it."""

from __future__ import annotations

import subprocess
import sys

from tests.support.settings import ROOT


def test_core_and_cli_do_not_import_textual() -> None:
    code = (
        "import sys\n"
        "import lockconsole, lockconsole.cli.main, lockconsole.console.facade\n"
        "import lockconsole.engine.runner\n"
        "lockconsole.cli.main.build_parser()\n"
        "loaded = sorted(m for m in sys.modules if m == 'textual' or m.startswith('textual.'))\n"
        "print(','.join(loaded))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "", f"textual imported by the core: {out.stdout.strip()}"


def test_the_tui_does_import_textual() -> None:
    code = "import sys, lockconsole.tui.app; print('textual' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "True"
