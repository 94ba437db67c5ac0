"""`--log-format text|logfmt|json` on `run` (real PostgreSQL): every line of the JSON log parses
on its own and keeps data exact, logfmt lines are key=value pairs, hostile data (a pause note
with ESC, C1 and U+2028) never reaches stderr raw, and under systemd (`$JOURNAL_STREAM` naming
stderr) lines carry a syslog priority and no timestamp of their own."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

NOTE = "db move\x1b]0;owned\x07 \x9b31m done\u2028next line"
RAW = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u2028\u2029]")
PAIR = re.compile(r'(\w+)=("(?:[^"\\]|\\.)*"|\S+)')


def lockconsole(config: Path, *words: str, env: dict[str, str], stderr: int | None = None):
    return subprocess.run(
        [sys.executable, "-m", "lockconsole", "--config", str(config), *words],
        stdout=subprocess.PIPE, stderr=stderr or subprocess.PIPE, text=True, env=env,
        timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip


@pytest.fixture
def paused_job(pg_url, uid, write_config, cli_env):
    config = write_config(
        f'[databases.main]\nurl = "{pg_url}"\n[jobs.j_{uid}]\nstrategy = "pg-session"\n'
        'command = ["true"]\n'
    )
    done = lockconsole(config, "pause", f"j_{uid}", "--note", NOTE, env=cli_env)
    assert done.returncode == 0, done.stderr
    return config, f"j_{uid}"


def test_json_lines_parse_one_by_one_and_keep_the_note_exact(paused_job, cli_env):
    config, job = paused_job
    done = lockconsole(config, "run", job, "--log-format", "json", env=cli_env)
    assert done.returncode == 3, done.stderr  # paused: a skip
    lines = done.stderr.strip().splitlines()
    assert lines and not RAW.search(done.stderr)
    docs = [json.loads(line) for line in lines]  # each line is one JSON document
    paused = [d for d in docs if d.get("event") == "paused"]
    assert len(paused) == 1, docs
    assert paused[0]["job"] == job and paused[0]["level"] == "info"
    assert NOTE in paused[0]["message"]  # the note, exact, through JSON's escapes
    assert paused[0]["time"].endswith("Z")


def test_logfmt_lines_are_pairs_and_escape_the_note(paused_job, cli_env):
    config, job = paused_job
    done = lockconsole(config, "run", job, "--log-format", "logfmt", env=cli_env)
    assert done.returncode == 3, done.stderr
    assert not RAW.search(done.stderr)
    for line in done.stderr.strip().splitlines():
        pairs = dict(PAIR.findall(line))
        assert {"time", "level", "logger"} <= set(pairs), line
        assert " ".join(f"{k}={v}" for k, v in PAIR.findall(line)) == line  # nothing between pairs
    assert "event=paused" in done.stderr and "\\x1b" in done.stderr


def test_text_lines_escape_data_too(paused_job, cli_env):
    config, job = paused_job
    done = lockconsole(config, "run", job, env=cli_env)
    assert done.returncode == 3 and "event=paused" in done.stderr
    assert not RAW.search(done.stderr)


@pytest.mark.parametrize("log_format", ["text", "logfmt", "json"])
def test_under_systemd_lines_carry_a_priority_and_no_timestamp(paused_job, cli_env, log_format):
    config, job = paused_job
    read, write = os.pipe()
    st = os.fstat(write)
    env = dict(cli_env, JOURNAL_STREAM=f"{st.st_dev}:{st.st_ino}")
    try:
        done = lockconsole(
            config, "run", job, "--log-format", log_format, "--slot",
            "2026-01-01T00:00:00Z", env=env, stderr=write,
        )  # fmt: skip
    finally:
        os.close(write)
    with os.fdopen(read, encoding="utf-8") as pipe:
        text = pipe.read()
    assert done.returncode == 3, text
    lines = text.strip().splitlines()
    assert lines and all(re.match(r"<[0-7]>", line) for line in lines), lines
    assert "<6>" in text  # the paused attempt is info
    stamp = r"<[0-7]>(time=)?\d{4}-\d\d-\d\d[ T]\d\d:\d\d"  # the journal stamps lines itself
    assert not any(re.match(stamp, line) or " time=" in line for line in lines), lines
    if log_format == "json":  # after its priority, each line is still one JSON document
        docs = [json.loads(line[3:]) for line in lines]
        assert all("time" not in d and d["logger"].startswith("lockconsole.") for d in docs)


def test_a_journal_stream_of_another_file_is_not_the_journal(paused_job, cli_env, tmp_path):
    config, job = paused_job
    other = tmp_path / "other"
    other.write_text("", encoding="utf-8")
    st = os.stat(other)
    env = dict(cli_env, JOURNAL_STREAM=f"{st.st_dev}:{st.st_ino}")
    done = lockconsole(config, "run", job, "--log-format", "logfmt", env=env)
    assert not done.stderr.startswith("<") and "time=" in done.stderr


def _fields(line: str, log_format: str) -> dict[str, str]:
    if log_format == "json":
        return {k: str(v) for k, v in json.loads(line).items()}
    pairs = PAIR.findall(line)
    assert " ".join(f"{k}={v}" for k, v in pairs) == line, line  # nothing between pairs
    return {k: v.strip('"') for k, v in pairs}


@pytest.mark.parametrize("log_format", ["logfmt", "json"])
def test_each_line_names_the_module_that_wrote_it(pg_url, uid, write_config, cli_env, log_format):
    """`schedule` on real PostgreSQL: the scheduler's own lines and an attempt's events come from
    two modules, each line names its own, and both have the one formatter's shape."""
    job = f"every_s_{uid}"
    config = write_config(
        f'[databases.main]\nurl = "{pg_url}"\n[jobs.{job}]\nstrategy = "pg-session"\n'
        'schedule = "* * * * * *"\ncommand = ["true"]\n'
    )
    done = lockconsole(
        config, "schedule", "--job", job, "--for", "2.5", "--log-format", log_format, env=cli_env
    )
    assert done.returncode == 0, done.stderr
    lines = [_fields(line, log_format) for line in done.stderr.strip().splitlines()]
    by_logger: dict[str, list[dict[str, str]]] = {}
    for fields in lines:
        assert {"time", "level", "logger"} <= set(fields), fields
        by_logger.setdefault(fields["logger"], []).append(fields)
    text = "msg" if log_format == "logfmt" else "message"
    started = by_logger["lockconsole.engine.scheduler"]
    assert any(f.get(text, "").startswith("scheduler started") for f in started), started
    events = {f["event"] for f in by_logger["lockconsole.engine.attempt"]}
    assert {"acquired", "succeeded"} <= events, by_logger
    assert all(name.startswith("lockconsole.") for name in by_logger), sorted(by_logger)


@pytest.mark.parametrize("log_format", ["logfmt", "json"])
def test_one_formatter_on_the_package_logger_takes_every_module_and_other_libraries(log_format):
    """In one process: `setup` twice leaves one handler; two modules' records and a driver's
    warning come out in the same shape, each under its own logger's name."""
    import io
    import logging
    from datetime import UTC, datetime

    from lockconsole.cli import logs
    from lockconsole.engine import attempt, scheduler
    from lockconsole.model.jobs import Run

    package, root = logging.getLogger("lockconsole"), logging.getLogger()
    level = package.level
    stream = io.StringIO()
    try:
        logs.setup("text", stream=io.StringIO())
        logs.setup(log_format, stream=stream)
        ours = [h for h in package.handlers if getattr(h, "lockconsole", False)]
        foreign = [h for h in root.handlers if getattr(h, "lockconsole", False)]
        assert len(ours) == len(foreign) == 1
        assert ours[0].formatter is foreign[0].formatter
        slot = datetime(2026, 11, 29, 2, tzinfo=UTC)
        run = Run(
            job="nightly", slot=slot, instance="web-1", host="h", pid=1, trigger="scheduled",
            outcome="acquired", started_at=slot, strategy="pg-session", lock_key="42", id=7,
        )  # fmt: skip
        attempt.log_attempt("acquired", run)
        scheduler.log.info("scheduler started instance=%s", "web-1\x1b[2J")
        logging.getLogger("psycopg").warning("a driver's warning\x07")
        logging.getLogger("psycopg").info("a driver's chatter stays out")
    finally:
        for logger in (package, root):
            for h in [h for h in logger.handlers if getattr(h, "lockconsole", False)]:
                logger.removeHandler(h)
        package.setLevel(level)
    text = stream.getvalue()
    assert not RAW.search(text), text
    lines = [_fields(line, log_format) for line in text.strip().splitlines()]
    assert [f["logger"] for f in lines] == [
        "lockconsole.engine.attempt",
        "lockconsole.engine.scheduler",
        "psycopg",
    ]
    assert [f["level"] for f in lines] == ["info", "info", "warning"]
    assert lines[0]["event"] == "acquired" and lines[0]["job"] == "nightly"
    message = "msg" if log_format == "logfmt" else "message"
    assert lines[1][message].startswith("scheduler started instance=web-1")
    assert all(f["time"].endswith("Z") for f in lines)
