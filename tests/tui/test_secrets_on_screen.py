"""Passwords never reach the screen: the console's own screenshots, with a database whose URL
carries a password and is down (so its error shows in the banner), are scanned for it."""

from __future__ import annotations

import asyncio
import socket
from pathlib import Path

from lockconsole.config import parse_config
from lockconsole.console import Console
from lockconsole.tui.app import LockConsoleApp

ROOT = Path(__file__).resolve().parents[2]


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

    async def shoot() -> list[str]:
        console = Console(config)
        try:
            app = LockConsoleApp(console)
            async with app.run_test(size=(120, 40)) as pilot:
                for _ in range(50):  # until the down database's error is on screen
                    await pilot.pause(0.1)
                    if app.snapshot is not None and app.snapshot.errors:
                        break
                await pilot.pause(0.2)
                shots = [app.save_screenshot("dash.svg", str(tmp_path))]
                await pilot.press("question_mark")
                await pilot.pause(0.2)
                shots.append(app.save_screenshot("help.svg", str(tmp_path)))
                return [Path(p).read_text(encoding="utf-8") for p in shots]
        finally:
            console.close()

    svgs = asyncio.run(shoot())
    assert "down" in svgs[0], "the down database is shown"
    for svg in svgs:
        assert secret not in svg


def test_committed_screenshots_carry_no_sample_password():
    shots = sorted((ROOT / "screenshots").glob("*.svg"))
    assert shots, "make screenshots has been run"
    for path in shots:
        assert "not-shown" not in path.read_text(encoding="utf-8"), path.name
