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


def lockconsole(config: Path, *words: str, env: dict[str, str], stderr: int | None = None):  # type: ignore[no-untyped-def]
    return subprocess.run(
        [sys.executable, "-m", "lockconsole", "--config", str(config), *words],
        stdout=subprocess.PIPE, stderr=stderr or subprocess.PIPE, text=True, env=env,
        timeout=120, stdin=subprocess.DEVNULL,
    )  # fmt: skip


@pytest.fixture
def paused_job(pg_url, uid, write_config, cli_env):  # type: ignore[no-untyped-def]
    config = write_config(
        f'[databases.main]\nurl = "{pg_url}"\n[jobs.j_{uid}]\nstrategy = "pg-session"\n'
        'command = ["true"]\n'
    )
    done = lockconsole(config, "pause", f"j_{uid}", "--note", NOTE, env=cli_env)
    assert done.returncode == 0, done.stderr
    return config, f"j_{uid}"


def test_json_lines_parse_one_by_one_and_keep_the_note_exact(paused_job, cli_env):  # type: ignore[no-untyped-def]
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


def test_logfmt_lines_are_pairs_and_escape_the_note(paused_job, cli_env):  # type: ignore[no-untyped-def]
    config, job = paused_job
    done = lockconsole(config, "run", job, "--log-format", "logfmt", env=cli_env)
    assert done.returncode == 3, done.stderr
    assert not RAW.search(done.stderr)
    for line in done.stderr.strip().splitlines():
        pairs = dict(PAIR.findall(line))
        assert {"time", "level", "logger"} <= set(pairs), line
        assert " ".join(f"{k}={v}" for k, v in PAIR.findall(line)) == line  # nothing between pairs
    assert "event=paused" in done.stderr and "\\x1b" in done.stderr


def test_text_lines_escape_data_too(paused_job, cli_env):  # type: ignore[no-untyped-def]
    config, job = paused_job
    done = lockconsole(config, "run", job, env=cli_env)
    assert done.returncode == 3 and "event=paused" in done.stderr
    assert not RAW.search(done.stderr)


@pytest.mark.parametrize("log_format", ["text", "logfmt"])
def test_under_systemd_lines_carry_a_priority_and_no_timestamp(paused_job, cli_env, log_format):  # type: ignore[no-untyped-def]
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


def test_a_journal_stream_of_another_file_is_not_the_journal(paused_job, cli_env, tmp_path):  # type: ignore[no-untyped-def]
    config, job = paused_job
    other = tmp_path / "other"
    other.write_text("", encoding="utf-8")
    st = os.stat(other)
    env = dict(cli_env, JOURNAL_STREAM=f"{st.st_dev}:{st.st_ino}")
    done = lockconsole(config, "run", job, "--log-format", "logfmt", env=env)
    assert not done.stderr.startswith("<") and "time=" in done.stderr
