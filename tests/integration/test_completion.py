"""`lockconsole completion bash|zsh`: the bash script, sourced in a real bash, completes the
subcommands and their options; the zsh script is a compdef for lockconsole (syntax-checked by
zsh where it is installed)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys

import pytest

from tests.support.cli import run_cli


def script(shell: str, env: dict[str, str]) -> str:
    done = run_cli(None, "completion", shell, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout


def complete(bash_script: str, *words: str, env: dict[str, str] | None = None) -> list[str]:
    """What bash offers for the command line `words` (the last word being completed)."""
    line = " ".join(words)
    program = (
        f"source /dev/stdin <<'LOCKCONSOLE_COMPLETION'\n{bash_script}\nLOCKCONSOLE_COMPLETION\n"
        f"COMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; COMP_LINE='{line}'; "
        "COMP_POINT=${#COMP_LINE}; _shtab_lockconsole; printf '%s\\n' \"${COMPREPLY[@]}\""
    )
    done = subprocess.run(
        ["bash", "-c", program], capture_output=True, text=True, timeout=60, env=env
    )
    assert done.returncode == 0, done.stderr
    return [w.strip() for w in done.stdout.splitlines() if w.strip()]


def test_bash_completes_commands_and_options(cli_env) -> None:
    bash = script("bash", cli_env)
    assert "metrics" in complete(bash, "lockconsole", "me")
    assert set(complete(bash, "lockconsole", "")) >= {"run", "locks", "init", "metrics", "demo"}
    assert complete(bash, "lockconsole", "init", "--u") == ["--url"]
    assert set(complete(bash, "lockconsole", "metrics", "--")) >= {"--listen", "--textfile"}


def test_zsh_script_is_a_compdef(cli_env) -> None:
    zsh = script("zsh", cli_env)
    assert zsh.startswith("#compdef lockconsole")
    assert "metrics" in zsh and "--textfile" in zsh
    if shutil.which("zsh"):
        checked = subprocess.run(["zsh", "-n"], input=zsh, capture_output=True, text=True)
        assert checked.returncode == 0, checked.stderr


@pytest.mark.parametrize("shell", ["fish", ""])
def test_unknown_shell_is_one_line(shell: str, cli_env) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "lockconsole", "completion", shell],
        capture_output=True,
        text=True,
        env=cli_env,
        timeout=60,
    )
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1
    assert "invalid choice" in done.stderr


def test_bash_completes_job_names_databases_and_run_ids(
    own_database, uid, write_config, cli_env, tmp_path
):
    """Tab after `run`, `--job`, `--database` and `output` offers what the config names, and
    the ledger's newest run ids, asked of the `lockconsole` on the shell's PATH."""
    config = write_config(
        f"""
        [databases.billing]
        url = "{own_database}"
        [jobs.bill_{uid}]
        strategy = "pg-session"
        command = ["true"]
        [jobs.remind_{uid}]
        strategy = "pg-session"
        """
    )
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "lockconsole"
    wrapper.write_text(f'#!/bin/sh\nexec {sys.executable} -m lockconsole "$@"\n', encoding="utf-8")
    wrapper.chmod(0o755)
    env = dict(cli_env, LOCKCONSOLE_CONFIG=str(config), PATH=f"{bin_dir}:{cli_env['PATH']}")
    ran = subprocess.run(
        [sys.executable, "-m", "lockconsole", "run", f"bill_{uid}", "--json"],
        capture_output=True, text=True, env=env, timeout=60,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    run_id = json.loads(ran.stdout)["run_id"]
    bash = script("bash", env)

    def offered(*words: str) -> list[str]:
        return complete(bash, *words, env=env)

    assert offered("lockconsole", "run", "") == sorted([f"bill_{uid}", f"remind_{uid}"])
    assert offered("lockconsole", "run", "rem") == [f"remind_{uid}"]
    assert offered("lockconsole", "history", "--job", "bi") == [f"bill_{uid}"]
    assert offered("lockconsole", "release", "--database", "") == ["billing"]
    assert run_id in offered("lockconsole", "output", "")
