"""The installed console in a real terminal (tmux, 160x45) steering a real fleet of one
(`lockconsole schedule --instance web-2`) on PostgreSQL: pause with a note typed in the modal,
the jobs pane shows who paused it and why, every attempt of the fleet finds it paused; resume;
trigger on the fleet, and the log follows the request from queued to succeeded on web-2."""

from __future__ import annotations

import signal
import sys
from pathlib import Path

from lockconsole.backends.ledger.pauses import Pauses
from lockconsole.backends.ledger.store import Ledger
from lockconsole.config.loader import load_config
from lockconsole.model.slots import utcnow

from tests.integration.test_terminal import Terminal, binary
from tests.support.runner_helpers import lockconsole, runs_of


class WideTerminal(Terminal):
    def start(self, argv: list[str], env: dict[str, str]) -> None:
        status = self.folder / "exit_status"
        status.unlink(missing_ok=True)
        line = " ".join(f"'{a}'" for a in argv) + f"; echo $? > '{status}'; sleep 600"
        exports = [x for k, v in env.items() for x in ("-e", f"{k}={v}")]
        # no client attaches: size the window by hand (tmux may start it at 80x24)
        self._run("new-session", "-d", "-x", "160", "-y", "45", "-s", "lc", *exports, line)
        self._run("set-option", "-g", "window-size", "manual")
        self._run("resize-window", "-t", "lc", "-x", "160", "-y", "45")


def pauses(config: Path, job: str) -> dict[str, object]:
    cfg = load_config(str(config))
    with Ledger(cfg.ledger_for(cfg.job(job))) as ledger:
        return dict(Pauses(ledger).pauses(utcnow()))


def test_pause_resume_and_trigger_on_the_fleet_from_a_real_terminal(
    pg_url, uid, write_config, cli_env, tmp_path
):
    job = f"steer_{uid}"
    marks = tmp_path / "marks"
    (tmp_path / "mark.py").write_text(
        "import sys\nopen(sys.argv[1], 'a').write('ran\\n')\n", encoding="utf-8"
    )
    config = write_config(f"""
        [databases.main]
        url = "{pg_url}"
        [jobs.{job}]
        schedule = "0 2 * * *"
        command = ["{sys.executable}", "{tmp_path / "mark.py"}", "{marks}"]
        """)
    fleet = lockconsole(config, "schedule", "--instance", "web-2", env=cli_env)
    terminal = WideTerminal(f"lockconsole-steer-{uid}", tmp_path)
    try:
        env = {k: cli_env[k] for k in ("PATH", "HOME", "XDG_CONFIG_HOME") if k in cli_env}
        env |= {"TERM": "xterm-256color", "LANG": "C.UTF-8"}
        terminal.start([binary(), "--config", str(config)], env)
        terminal.wait_screen(lambda s: job in s and "main ● ok" in s, "the dashboard")

        terminal.press("P")
        terminal.wait_screen(lambda s: "on every instance?" in s, "the pause modal")
        terminal.press("-l", "incident 42: invoices doubled")
        terminal.press("Enter")
        screen = terminal.wait_screen(
            lambda s: "PAUSED by " in s and "incident 42" in s, "the jobs pane to show the pause"
        )
        assert job in pauses(config, job)
        assert " ago: incident 42" in screen

        terminal.press("P")
        terminal.wait_screen(lambda s: f"Resume {job}?" in s, "the resume question")
        terminal.press("y")
        terminal.wait_screen(lambda s: "PAUSED by" not in s, "the jobs pane to drop the pause")
        assert job not in pauses(config, job)

        terminal.press("t")
        terminal.wait_screen(lambda s: "On the fleet (f)" in s, "where to run it")
        terminal.press("f")
        screen = terminal.wait_screen(
            lambda s: f"of {job}: succeeded on web-2 (run " in s, "the request to succeed"
        )
        assert f"of {job}: queued" in screen  # the log keeps every step
        terminal.press("q")
        assert terminal.exit_status() == 0
    finally:
        terminal.close()
        fleet.send_signal(signal.SIGTERM)
        assert fleet.wait(timeout=60) == 0, fleet.communicate()[1]
    runs = runs_of(config, job)
    assert [(r.instance, r.outcome, r.trigger) for r in runs] == [("web-2", "succeeded", "manual")]
    assert marks.read_text() == "ran\n"
