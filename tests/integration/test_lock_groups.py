"""Jobs that share a lock on purpose (`lock_group`), on real PostgreSQL and MariaDB: while one
member runs, another member's attempt finds the lock held and skips; once it is free the other
runs, in its own slot. `config` shows the group and the one lock both take."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lockconsole.model.keys import name_to_int64

from tests.support.cli import run_cli


def lockconsole(config: Path, env: dict[str, str], *words: str, wait: bool = True):
    argv = [sys.executable, "-m", "lockconsole", "--config", str(config), *words]
    if not wait:
        return subprocess.Popen(
            argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
    return run_cli(config, *words, env=env)


@pytest.mark.parametrize("kind", ["postgresql", pytest.param("mysql", marks=pytest.mark.mysql)])
def test_members_of_a_group_take_turns(kind, request, uid, write_config, cli_env, tmp_path) -> None:
    url = request.getfixturevalue("pg_url" if kind == "postgresql" else "mysql_url")
    strategy = "pg-session" if kind == "postgresql" else "mysql"
    started, go = tmp_path / "started", tmp_path / "go"
    waiter = (
        f"import pathlib, time; pathlib.Path({str(started)!r}).touch()\n"
        f"while not pathlib.Path({str(go)!r}).exists(): time.sleep(0.02)"
    )
    group = f"billing_{uid}"
    config = write_config(
        f'[databases.main]\nurl = "{url}"\n'
        f'[jobs.nightly_{uid}]\nstrategy = "{strategy}"\nlock_group = "{group}"\n'
        f'command = [{json.dumps(sys.executable)}, "-c", {json.dumps(waiter)}]\n'
        f'[jobs.monthly_{uid}]\nstrategy = "{strategy}"\nlock_group = "{group}"\n'
        'command = ["true"]\n'
    )
    shown = json.loads(lockconsole(config, cli_env, "config", "--json").stdout)
    jobs = (
        {j["name"]: j for j in shown["jobs"]} if isinstance(shown["jobs"], list) else shown["jobs"]
    )
    nightly, monthly = jobs[f"nightly_{uid}"], jobs[f"monthly_{uid}"]
    assert nightly["lock_group"] == monthly["lock_group"] == group
    assert nightly["key"] == monthly["key"]  # one lock: the group's name
    if kind == "postgresql":
        assert str(name_to_int64(group)) in str(nightly["key"])
    first = lockconsole(config, cli_env, "run", f"nightly_{uid}", "--json", wait=False)
    try:
        deadline = time.monotonic() + 60
        while not started.exists():  # the barrier: the first member runs, holding the lock
            assert first.poll() is None, first.communicate()
            assert time.monotonic() < deadline, "the first member never started"
            time.sleep(0.02)
        skipped = lockconsole(config, cli_env, "run", f"monthly_{uid}", "--json")
        assert skipped.returncode == 3, skipped.stderr
        assert json.loads(skipped.stdout)["outcome"] == "skipped"
    finally:
        go.touch()
    out, err = first.communicate(timeout=60)
    assert first.returncode == 0, err
    ran = lockconsole(config, cli_env, "run", f"monthly_{uid}", "--json")
    assert ran.returncode == 0, ran.stderr
    # each member keeps its own slots: nightly's run (often in the same minute) claims none of
    # monthly's, so monthly runs rather than finding "slot already ran"
    assert json.loads(ran.stdout)["outcome"] == "succeeded"
    assert json.loads(out)["outcome"] == "succeeded"
