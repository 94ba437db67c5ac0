"""Passwords never reach the screen: the console's own screenshots, with a database whose URL
carries a password and is down (so its error shows in the banner), are scanned for it."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

from textual.widgets import Static

from lockconsole.config.loader import parse_config
from lockconsole.console.facade import Console
from lockconsole.tui.app import LockConsoleApp
from lockconsole.tui.screens.help import HelpScreen

from tests.support.helpers import until
from tests.support.settings import ROOT


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_password_of_a_down_database_is_not_on_screen(pg_url, uid, tmp_path):
    secret = f"Sw0rdfish_{uid}"
    config = parse_config(
        f"""
        [databases.main]
        url = "{pg_url.replace("postgres@", "postgres:${{PW}}@", 1)}"
        [databases.down]
        url = "postgresql://billing:${{PW}}@127.0.0.1:{closed_port()}/billing"
        [jobs.up_{uid}]
        database = "main"
        [jobs.dn_{uid}]
        database = "down"
        """.replace("\n        ", "\n"),
        "secrets.toml",
        {"PW": secret},
    )

    async def shoot() -> tuple[str, list[str]]:
        console = Console(config)
        try:
            app = LockConsoleApp(console)
            async with app.run_test(size=(120, 40)) as pilot:
                banner = app.query_one("#banner", Static)
                await until(
                    pilot,
                    lambda: "down" in app.errors and banner.has_class("-shown"),
                    what="the down database's error in the banner",
                )
                shown = str(banner.render())
                await pilot.pause()  # the banner's first paint, before the screenshot of it
                shots = [app.save_screenshot("dash.svg", str(tmp_path))]
                await pilot.press("question_mark")
                await until(pilot, lambda: isinstance(app.screen, HelpScreen), what="help")
                shots.append(app.save_screenshot("help.svg", str(tmp_path)))
                return shown, [Path(p).read_text(encoding="utf-8") for p in shots]
        finally:
            console.close()

    banner, svgs = asyncio.run(shoot())
    # the error reached the screen: the banner names the database and says what went wrong
    assert "⚠ down:" in banner and "refused" in banner.lower(), banner
    assert "⚠" in svgs[0], "the banner is in the screenshot"
    for text in (banner, *svgs):
        assert secret not in text


def test_committed_screenshots_carry_no_sample_password():
    shots = sorted((ROOT / "screenshots").glob("*.svg"))
    assert shots, "make screenshots has been run"
    for path in shots:
        assert "not-shown" not in path.read_text(encoding="utf-8"), path.name
