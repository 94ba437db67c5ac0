"""The systemd files in deploy/systemd: `systemd-analyze verify` finds nothing in the units (and
does find a unit broken on purpose), their command lines parse with lockconsole's own parser,
the example config parses with the example environment file, the stop timeout covers every
job's stop_grace, the timer fires at the job's schedule, and the sysusers file makes the units'
user. systemd need not run: verify, calendar, security --offline and sysusers --root work on
files alone."""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from lockconsole.cli.main import build_parser, command_word
from lockconsole.config.loader import Config, parse_config
from lockconsole.config.search import SYSTEM_CONFIG
from lockconsole.engine.runner import EXIT_SKIPPED, EXIT_USAGE
from lockconsole.model.slots import next_fire, slot_for

from tests.support.settings import CI, ROOT

HERE = ROOT / "deploy" / "systemd"
SCHEDULE = HERE / "lockconsole-schedule.service"
RUN = HERE / "lockconsole-run@.service"
TIMER = HERE / "lockconsole-run@.timer"
UNITS = (SCHEDULE, RUN, TIMER)
SHIPPED_BINARY = "/usr/local/bin/lockconsole"
LOCKCONSOLE = Path(sys.executable).parent / "lockconsole"  # the venv's entry point
JOB = "nightly_billing"  # the example config's job, as the template's instance name
EXIT_BOUND = 2.0  # lockconsole exits within the longest stop_grace + 2 s of SIGTERM (README)


def tool(name: str) -> str:
    """A systemd tool's path; a skip without it (a failure under CI=true: .ci/run installs it)."""
    found = shutil.which(name) or (
        f"/usr/bin/{name}" if Path(f"/usr/bin/{name}").exists() else None
    )
    if found is None:
        reason = f"{name} is not installed (Debian package systemd; .ci/run installs it)"
        if CI:
            pytest.fail(reason)
        pytest.skip(reason)
    return found


def unit(path: Path) -> dict[str, list[tuple[str, str]]]:
    """A unit file's sections: name -> [(key, value)] in order (keys may repeat)."""
    sections: dict[str, list[tuple[str, str]]] = {}
    current: list[tuple[str, str]] = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith(("#", ";")):
            continue
        if line.startswith("[") and line.endswith("]"):
            current = sections.setdefault(line[1:-1], [])
        else:
            key, _, value = line.partition("=")
            current.append((key.strip(), value.strip()))
    return sections


def value(path: Path, section: str, key: str) -> str:
    values = [v for k, v in unit(path)[section] if k == key]
    assert values, f"{path.name}: no {key}= in [{section}]"
    return values[-1]


def render(folder: Path, *paths: Path) -> list[Path]:
    """Copies whose ExecStart runs this venv's lockconsole (verify checks that it exists)."""
    assert LOCKCONSOLE.exists(), LOCKCONSOLE
    out = []
    for path in paths:
        text = path.read_text(encoding="utf-8")
        assert path.suffix != ".service" or SHIPPED_BINARY in text, path.name
        copy = folder / path.name
        copy.write_text(text.replace(SHIPPED_BINARY, str(LOCKCONSOLE)), encoding="utf-8")
        out.append(copy)
    return out


def verify(*paths: Path) -> str:
    """What `systemd-analyze verify` says about the units: "" when it finds nothing.

    verify exits 0 on an unknown key or a value it cannot parse (it warns and ignores the
    line), so its output counts as well as its exit code."""
    done = subprocess.run(
        [tool("systemd-analyze"), "verify", "--man=no", "--generators=no", *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=paths[0].parent,
        env={"PATH": "/usr/sbin:/usr/bin:/sbin:/bin", "SYSTEMD_LOG_LEVEL": "notice"},
    )
    said = (done.stdout + done.stderr).strip()
    return said or ("" if done.returncode == 0 else f"exit code {done.returncode}")


def example_env() -> dict[str, str]:
    lines = (HERE / "lockconsole.env.example").read_text(encoding="utf-8").splitlines()
    pairs = [line.split("=", 1) for line in lines if line.strip() and not line.startswith("#")]
    return {k.strip(): v.strip() for k, v in pairs}


def example_config() -> Config:
    return parse_config(
        (HERE / "config.toml").read_text(encoding="utf-8"), "config.toml", example_env()
    )


def test_systemd_analyze_verify_finds_nothing_in_the_units(tmp_path: Path) -> None:
    rendered = render(tmp_path, *UNITS)
    assert verify(*rendered) == ""
    # the template as a job's instance: %i expanded, the timer next to its service
    for path in rendered:
        stem, _, kind = path.name.partition("@.")
        if kind:
            (tmp_path / f"{stem}@{JOB}.{kind}").write_text(path.read_text(encoding="utf-8"))
    assert (
        verify(
            tmp_path / f"lockconsole-run@{JOB}.timer", tmp_path / f"lockconsole-run@{JOB}.service"
        )
        == ""
    )


@pytest.mark.parametrize(
    ("path", "old", "new"),
    [
        (SCHEDULE, "KillSignal=SIGTERM", "KillSignal=SIGTREM"),
        (SCHEDULE, "TimeoutStopSec=30s", "TimeoutStopSec=thirty"),
        (SCHEDULE, "NoNewPrivileges=yes", "NoNewPrivilege=yes"),
        (RUN, "Type=oneshot", "Type=once"),
        (RUN, str(LOCKCONSOLE), "/nonexistent/lockconsole"),
        (TIMER, "OnCalendar=*-*-* 02:00:00 UTC", "OnCalendar=02:00 every day"),
    ],
    ids=["signal", "timespan", "unknown-key", "type", "missing-binary", "calendar"],
)
def test_systemd_analyze_verify_catches_a_unit_broken_on_purpose(
    tmp_path: Path, path: Path, old: str, new: str
) -> None:
    (copy,) = render(tmp_path, path)
    text = copy.read_text(encoding="utf-8")
    assert old in text
    copy.write_text(text.replace(old, new), encoding="utf-8")
    said = verify(copy)
    assert said, f"verify found nothing wrong with {new!r}"
    assert copy.name in said or "lockconsole-run@" in said, said


def test_the_units_run_command_lines_lockconsoles_parser_accepts() -> None:
    config = example_config()
    for path, command in ((SCHEDULE, "schedule"), (RUN, "run")):
        argv = shlex.split(value(path, "Service", "ExecStart").replace("%i", JOB))
        assert argv[0] == SHIPPED_BINARY
        args = build_parser(command_word(argv[1:])).parse_args(argv[1:])
        assert args.command == command
        # `run` names one job, `schedule` every job unless --job names some
        names = [args.job] if command == "run" else args.job or list(config.jobs)
        assert names == ([JOB] if command == "run" else list(config.jobs))
        for name in names:
            config.job(name)  # a job the example config has


def test_the_units_read_the_system_config_and_the_password_file() -> None:
    config_text = (HERE / "config.toml").read_text(encoding="utf-8")
    wanted = set(re.findall(r"\$\{(\w+)\}", config_text))
    assert wanted == set(example_env()), "the env file sets exactly what the config expands"
    config = example_config()
    assert "change-me" not in str(config.databases["main"].url)  # masked when shown
    source = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "lockconsole").rglob("*.py"))
    for path in (SCHEDULE, RUN):
        env = dict(
            item.split("=", 1)
            for item in (v for k, v in unit(path)["Service"] if k == "Environment")
        )
        assert env == {"LOCKCONSOLE_CONFIG": str(SYSTEM_CONFIG)}
        assert all(f'"{name}"' in source for name in env), "lockconsole reads these variables"
        assert value(path, "Service", "EnvironmentFile") == "/etc/lockconsole/lockconsole.env"
        assert value(path, "Service", "User") == value(path, "Service", "Group") == "lockconsole"


def test_the_stop_timeout_covers_every_jobs_stop_grace() -> None:
    longest = max(job.stop_grace for job in example_config().jobs.values())
    for path in (SCHEDULE, RUN):
        assert value(path, "Service", "KillSignal") == "SIGTERM"
        assert value(path, "Service", "KillMode") == "mixed"  # lockconsole stops its jobs itself
        span = subprocess.run(
            [tool("systemd-analyze"), "timespan", value(path, "Service", "TimeoutStopSec")],
            capture_output=True,
            text=True,
            check=True,
        ).stdout
        seconds = int(re.search(r"μs: (\d+)", span).group(1)) / 1e6
        assert seconds > longest + EXIT_BOUND, (path.name, seconds, longest)


def test_exit_codes_the_units_name_are_lockconsoles() -> None:
    assert value(RUN, "Service", "SuccessExitStatus") == str(EXIT_SKIPPED)
    assert value(SCHEDULE, "Service", "RestartPreventExitStatus") == str(EXIT_USAGE)
    assert value(SCHEDULE, "Service", "Restart") == "on-failure"


def test_the_timer_fires_at_the_jobs_schedule_and_each_firing_is_its_own_slot() -> None:
    job = example_config().job(JOB)
    assert value(TIMER, "Timer", "RandomizedDelaySec") == "0"
    assert value(TIMER, "Timer", "AccuracySec") == "1s"
    assert (HERE / TIMER.name.replace(".timer", ".service")).is_file()
    base = datetime(2026, 3, 27, 12, 0, tzinfo=UTC)  # across the EU's change to summer time
    done = subprocess.run(
        [
            tool("systemd-analyze"),
            "calendar",
            "--iterations=8",
            f"--base-time={base:%Y-%m-%d %H:%M:%S} UTC",
            value(TIMER, "Timer", "OnCalendar"),
        ],
        capture_output=True,
        text=True,
        env={"PATH": "/usr/bin:/bin", "TZ": "UTC"},
        check=True,
    )
    stamps = re.findall(
        r"(?:Next elapse|Iter\. #\d+): \w+ (\d{4}-\d\d-\d\d \d\d:\d\d:\d\d) UTC", done.stdout
    )
    timer = [datetime.fromisoformat(s).replace(tzinfo=UTC) for s in stamps]
    assert len(timer) == 8, done.stdout
    expected, at = [], base
    for _ in range(8):
        fire = next_fire(job, at)
        assert fire is not None
        at = fire
        expected.append(at)
    assert timer == expected
    for firing in timer:  # fired on time, a little late, or a little early: the same slot
        for skew in (0.0, 0.9, -0.4):
            assert slot_for(job, firing + timedelta(seconds=skew)) == firing


def test_sysusers_makes_the_user_the_units_run_as(tmp_path: Path) -> None:
    (tmp_path / "etc").mkdir()
    done = subprocess.run(
        [tool("systemd-sysusers"), f"--root={tmp_path}", str(HERE / "lockconsole.sysusers")],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    users = {
        line.split(":")[0]: line.split(":")
        for line in (tmp_path / "etc/passwd").read_text().splitlines()
    }
    groups = {line.split(":")[0] for line in (tmp_path / "etc/group").read_text().splitlines()}
    for path in (SCHEDULE, RUN):
        user = users[value(path, "Service", "User")]
        assert value(path, "Service", "Group") in groups
        assert user[5] == value(path, "Service", "WorkingDirectory") == "/var/lib/lockconsole"
        assert value(path, "Service", "StateDirectory") == "lockconsole"  # makes that folder
        assert user[6].endswith("nologin")
        assert 0 < int(user[2]) < 1000  # a system user


def test_the_services_hardening_scores_ok(tmp_path: Path) -> None:
    for path in render(tmp_path, SCHEDULE, RUN):
        done = subprocess.run(
            [
                tool("systemd-analyze"),
                "security",
                "--offline=true",
                "--threshold=40",
                "--no-pager",
                str(path),
            ],
            capture_output=True,
            text=True,
            timeout=60,
            cwd=tmp_path,
        )
        found = re.search(r"Overall exposure level for \S+: (\d+\.\d)", done.stdout + done.stderr)
        assert found, done.stdout + done.stderr
        assert float(found.group(1)) <= 4.0, found.group(0)  # systemd calls up to 4.9 "OK"
        assert done.returncode == 0, done.stdout + done.stderr
