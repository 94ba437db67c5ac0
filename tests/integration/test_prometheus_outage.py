"""A real Prometheus (its own process, scraping every second and evaluating
deploy/prometheus/lockconsole.rules.yml every second) scrapes a real `lockconsole metrics`
over a real PostgreSQL ledger; the test makes a double run, then cuts the ledger's database (a
TCP proxy of its own) and brings it back. The DoubleRun alert fires, stays firing through the
outage with the same activeAt (one notification, never two), while the job's series are gone
from Prometheus and job_up says 0, and its summary names the job and the slot."""

from __future__ import annotations

import json
import shutil
import socket
import subprocess
import urllib.parse
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lockconsole import run_once
from lockconsole.config.loader import load_config

from tests.integration.test_metrics_outage import start_exporter
from tests.support.helpers import wait_for
from tests.support.settings import CI, ROOT
from tests.support.tcp_proxy import SwitchableProxy, proxied

RULES = ROOT / "deploy" / "prometheus" / "lockconsole.rules.yml"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class Prometheus:
    def __init__(self, base: str) -> None:
        self.base = base

    def get(self, path: str, **params: str) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        with urllib.request.urlopen(f"{self.base}{path}{query}", timeout=30) as answer:
            return json.loads(answer.read())["data"]

    def query(self, expr: str) -> list[dict[str, Any]]:
        return list(self.get("/api/v1/query", query=expr)["result"])

    def alerts(self, name: str) -> list[dict[str, Any]]:
        return [a for a in self.get("/api/v1/alerts")["alerts"] if a["labels"]["alertname"] == name]


@pytest.fixture
def started() -> Iterator[list[subprocess.Popen[str]]]:
    """Processes the test started, killed (by their pid) at the end."""
    processes: list[subprocess.Popen[str]] = []
    yield processes
    for process in processes:
        if process.poll() is None:
            process.kill()
            process.wait()


def _prometheus(tmp_path: Path, target: str, started: list[subprocess.Popen[str]]) -> Prometheus:
    binary = shutil.which("prometheus")
    if binary is None:
        reason = "prometheus is not installed (Debian package prometheus)"
        if CI:
            pytest.fail(reason)
        pytest.skip(reason)
    config = tmp_path / "prometheus.yml"
    config.write_text(
        json.dumps(  # JSON is YAML
            {
                "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                "rule_files": [str(RULES)],
                "scrape_configs": [
                    {"job_name": "lockconsole", "static_configs": [{"targets": [target]}]}
                ],
            }
        )
    )
    port = _free_port()
    process = subprocess.Popen(
        [binary, f"--config.file={config}", f"--storage.tsdb.path={tmp_path / 'tsdb'}"]
        + [f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    started.append(process)
    prometheus = Prometheus(f"http://127.0.0.1:{port}")

    def ready() -> bool:
        try:
            with urllib.request.urlopen(f"{prometheus.base}/-/ready", timeout=5) as answer:
                return answer.status == 200
        except OSError:
            return False

    wait_for(ready, what="prometheus ready")
    return prometheus


def test_a_double_run_stays_firing_through_an_outage_in_real_prometheus(
    pg_url: str, uid: str, write_config, cli_env, started, tmp_path: Path
) -> None:
    proxy, url = proxied(pg_url, 5432, SwitchableProxy)
    try:
        job = f"p_dr_{uid}"
        path = write_config(
            f"[databases.pg]\nurl = {json.dumps(url)}\n"
            f'[jobs.{job}]\ndatabase = "pg"\nallow_pooler = true\nonce_per_slot = false\n'
            'schedule = "0 2 * * *"\n'
        )
        config = load_config(str(path))
        with run_once(job, config=config, instance="web-1") as first:
            assert first.acquired
        exporter = start_exporter(path, cli_env, started)
        target = urllib.parse.urlsplit(exporter).netloc
        prometheus = _prometheus(tmp_path, target, started)
        counter = f'lockconsole_slots_total{{job_name="{job}",status="double_run"}}'
        wait_for(lambda: prometheus.query(counter), what="the counter scraped at 0")

        with run_once(job, config=config, instance="web-2") as second:  # the slot again
            assert second.acquired
        slot = second.run.slot

        def firing() -> dict[str, Any] | None:
            found = [a for a in prometheus.alerts("LockconsoleDoubleRun") if a["state"] == "firing"]
            return found[0] if found else None

        alert = wait_for(firing, what="DoubleRun firing")
        assert alert["labels"]["job_name"] == job
        assert alert["annotations"]["summary"].startswith(
            f"{job}: slot {slot.strftime('%Y-%m-%d %H:%M:%S')} +0000 UTC ran more than once"
        )
        active = alert["activeAt"]

        proxy.cut()
        up = f'lockconsole_job_up{{job_name="{job}"}}'
        wait_for(lambda: [r for r in prometheus.query(up) if r["value"][1] == "0"], what="up 0")
        wait_for(lambda: not prometheus.query(counter), what="the counter gone (stale)")
        # a few evaluations into the outage: still the same firing alert, and the job unknown
        wait_for(
            lambda: [a for a in prometheus.alerts("LockconsoleJobUnknown") if a["state"]],
            what="JobUnknown pending",
        )
        again = firing()
        assert again is not None and again["activeAt"] == active
        assert prometheus.query(f'lockconsole_job_slots{{job_name="{job}"}}') == []  # not 0

        proxy.restore()
        wait_for(lambda: [r for r in prometheus.query(up) if r["value"][1] == "1"], what="up 1")
        wait_for(lambda: prometheus.query(counter), what="the counter back")
        after = firing()
        assert after is not None and after["activeAt"] == active  # one alert, never two
        (back,) = prometheus.query(counter)
        assert back["value"][1] == "1"  # counted once, monotonic across the outage
    finally:
        proxy.close()
