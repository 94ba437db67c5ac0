"""The Prometheus alert rules in deploy/prometheus: `promtool check rules` and `promtool test
rules` pass (each alert fires on series made for it and stays quiet on healthy ones, and an
outage of its database never resolves it), every alert has a runbook naming a lockconsole
command, and every metric a rule reads is one that `lockconsole metrics` exports."""

from __future__ import annotations

import re
import shutil
import subprocess
from datetime import UTC, datetime
from pathlib import Path

import pytest

from lockconsole.config.loader import parse_config
from lockconsole.metrics.counters import Counters
from lockconsole.metrics.figures import PREFIX, figures
from lockconsole.model.views import Snapshot

from tests.support.settings import CI, ROOT

HERE = ROOT / "deploy" / "prometheus"
RULES = HERE / "lockconsole.rules.yml"
TESTS = HERE / "lockconsole.tests.yml"


def promtool() -> str:
    found = shutil.which("promtool") or (
        "/usr/bin/promtool" if Path("/usr/bin/promtool").exists() else None
    )
    if found is None:
        reason = "promtool is not installed (Debian package prometheus; .ci/run installs it)"
        if CI:
            pytest.fail(reason)
        pytest.skip(reason)
    return found


def alerts() -> list[str]:
    return re.findall(r"^\s+- alert: (\w+)$", RULES.read_text(), flags=re.M)


def test_promtool_checks_the_rules() -> None:
    done = subprocess.run(
        [promtool(), "check", "rules", str(RULES)], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"SUCCESS: {len(alerts())} rules found" in done.stdout


def test_promtool_unit_tests_pass() -> None:
    done = subprocess.run(
        [promtool(), "test", "rules", TESTS.name],
        capture_output=True,
        text=True,
        cwd=HERE,
        timeout=120,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS" in done.stdout


def test_every_alert_is_unit_tested_firing_and_has_a_runbook() -> None:
    names = alerts()
    assert set(names) == {
        "LockconsoleDoubleRun",
        "LockconsoleMissedSlot",
        "LockconsoleSlotFailed",
        "LockconsoleLockLost",
        "LockconsoleAbandonedAttempt",
        "LockconsoleNoRecentSuccess",
        "LockconsoleStaleHolder",
        "LockconsoleDuplicates",
        "LockconsoleDatabaseDown",
        "LockconsoleJobUnknown",
        "LockconsoleExporterAbsent",
    }
    cases = re.split(r"^\s+- eval_time: ", TESTS.read_text(), flags=re.M)[1:]
    firing = {re.search(r"alertname: (\w+)", c).group(1) for c in cases if "exp_labels" in c}
    quiet = {re.search(r"alertname: (\w+)", c).group(1) for c in cases if "exp_alerts: []" in c}
    assert firing == set(names)
    assert set(names) - quiet <= {"LockconsoleNoRecentSuccess"}  # its quiet case: hourly at 60m
    blocks = re.split(r"^\s+- alert: ", RULES.read_text(), flags=re.M)[1:]
    for block in blocks:
        runbook = block.split("runbook:", 1)[1]
        assert "lockconsole " in runbook, block.splitlines()[0]


def test_every_alert_of_a_job_or_database_holds_while_it_is_unknown() -> None:
    """Each alert but the two that say "unknown" has the branch that keeps it firing while its
    job (or database) is not known up; the promtool cases above show it holding."""
    blocks = re.split(r"^\s+- alert: ", RULES.read_text(), flags=re.M)[1:]
    for block in blocks:
        name = block.splitlines()[0].strip()
        if name in {
            "LockconsoleDatabaseDown",
            "LockconsoleJobUnknown",
            "LockconsoleExporterAbsent",
        }:
            continue
        assert f'ALERTS{{alertname="{name}", alertstate="firing"}}' in block, name
        assert "unless on(" in block and "_up == 1" in block, name


def test_rules_read_only_exported_metrics() -> None:
    config = parse_config('[databases.main]\nurl = "postgresql://u@h/d"\n[jobs.j]\nkey = 1\n')
    snap = Snapshot(taken_at=datetime.now(UTC))
    shown = figures(snap, config, 0) + Counters(config).figures(config.jobs)
    exported = {PREFIX + f.name + ("_total" if f.kind == "counter" else "") for f in shown}
    used = set(re.findall(r"\blockconsole_[a-z_]+", RULES.read_text()))
    assert used and used <= exported, used - exported
