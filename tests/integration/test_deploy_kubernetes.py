"""The Kubernetes files in deploy/kubernetes: each validates against Kubernetes' own API
schemas (kubernetes-validate ships them: no cluster and no download needed), and every field
lockconsole depends on says what lockconsole reads: the environment variables it looks up, the
config path in its search, a config that its own loader accepts with the Secret's values, a
command line its own parser accepts, grace periods longer than the jobs' stop_grace, and a
CronJob that fires at the job's schedule. Then the CronJob's pod is run for real, three times
for one firing (as from three clusters), against PostgreSQL."""

from __future__ import annotations

import copy
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import kubernetes_validate
import psycopg
import pytest
import yaml

from lockconsole.cli.main import build_parser, command_word
from lockconsole.cli.run import check_instance
from lockconsole.config.loader import Config, load_config, parse_config
from lockconsole.config.search import SYSTEM_CONFIG
from lockconsole.model.errors import ConfigError
from lockconsole.model.slots import next_fire

from tests.support.settings import ROOT

HERE = ROOT / "deploy" / "kubernetes"
OLDEST = "1.27.0"  # CronJob's timeZone is GA from 1.27
LOCKCONSOLE = Path(sys.executable).parent / "lockconsole"
EXIT_BOUND = 2  # lockconsole exits within the longest stop_grace + 2 s of SIGTERM (README)
POD_NAMES = ("lockconsole-schedule-7d9c6b8f4-x2k9p", "lockconsole-nightly-billing-29412360-q8zrt")


def documents() -> dict[str, dict[str, Any]]:
    """kind -> the manifest (one of each kind in the folder)."""
    found: dict[str, dict[str, Any]] = {}
    for path in sorted(HERE.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text(encoding="utf-8")):
            assert doc["kind"] not in found, f"two {doc['kind']}s"
            found[doc["kind"]] = doc
    return found


def pod_spec(doc: dict[str, Any]) -> dict[str, Any]:
    if doc["kind"] == "CronJob":
        return doc["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    return doc["spec"]["template"]["spec"]


def container(doc: dict[str, Any]) -> dict[str, Any]:
    (only,) = pod_spec(doc)["containers"]
    return only


def config_text() -> str:
    return documents()["ConfigMap"]["data"]["config.toml"]


def secret_env() -> dict[str, str]:
    return dict(documents()["Secret"]["stringData"])


def pod_env(doc: dict[str, Any], pod_name: str) -> dict[str, str]:
    """The environment the kubelet gives the container, as the manifest asks."""
    secret = documents()["Secret"]
    env = {}
    for item in container(doc)["env"]:
        if "value" in item:
            env[item["name"]] = item["value"]
        elif "fieldRef" in item["valueFrom"]:
            assert item["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"
            env[item["name"]] = pod_name
        else:
            ref = item["valueFrom"]["secretKeyRef"]
            assert ref["name"] == secret["metadata"]["name"]
            env[item["name"]] = secret["stringData"][ref["key"]]
    return env


def config_for_pod(doc: dict[str, Any]) -> Config:
    return parse_config(config_text(), "config.toml", pod_env(doc, POD_NAMES[0]))


def workloads() -> list[dict[str, Any]]:
    docs = documents()
    return [docs["Deployment"], docs["CronJob"]]


@pytest.mark.parametrize("version", [OLDEST, kubernetes_validate.latest_version()])
def test_every_manifest_validates_against_kubernetes_api_schemas(version: str) -> None:
    docs = documents()
    assert set(docs) == {"ConfigMap", "Secret", "Deployment", "CronJob"}
    for doc in docs.values():
        kubernetes_validate.validate(doc, version, strict=True)  # raises on any unknown field


@pytest.mark.parametrize(
    ("where", "field"),
    [
        (("spec", "template", "spec"), "terminationGracePeriod"),
        (("spec", "template", "spec", "containers", 0), "envFrm"),
        (("spec", "template", "spec", "containers", 0, "env", 0, "valueFrom"), "fieldPath"),
    ],
    ids=["pod-field", "container-field", "downward-api"],
)
def test_the_schema_check_catches_a_misspelt_field(where: tuple[Any, ...], field: str) -> None:
    doc = copy.deepcopy(documents()["Deployment"])
    node = doc
    for step in where:
        node = node[step]
    node[field] = "metadata.name"
    with pytest.raises(kubernetes_validate.ValidationError, match=field):
        kubernetes_validate.validate(doc, kubernetes_validate.latest_version(), strict=True)


def test_the_pods_environment_is_what_lockconsole_reads() -> None:
    source = "\n".join(p.read_text(encoding="utf-8") for p in (ROOT / "lockconsole").rglob("*.py"))
    expanded = set(re.findall(r"\$\{(\w+)\}", config_text()))
    assert expanded, "the config takes its password from the environment"
    for doc in workloads():
        names = [item["name"] for item in container(doc)["env"]]
        for name in names:  # each one lockconsole looks up, or one the config expands
            assert f'"{name}"' in source or name in expanded, name
        assert expanded <= set(names), "every ${...} of the config is set"
        instance = next(i for i in container(doc)["env"] if i["name"] == "LOCKCONSOLE_INSTANCE")
        assert instance["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
        for name in expanded:  # the password comes from the Secret, never a literal
            item = next(i for i in container(doc)["env"] if i["name"] == name)
            assert set(item["valueFrom"]) == {"secretKeyRef"}
    for pod in POD_NAMES:  # the names Deployments and CronJobs give their pods are instances
        assert check_instance(None, pod) == pod


def test_the_config_is_mounted_where_lockconsole_looks() -> None:
    configmap = documents()["ConfigMap"]
    for doc in workloads():
        spec = pod_spec(doc)
        (mount,) = (m for m in container(doc)["volumeMounts"] if m["name"] == "config")
        (volume,) = (v for v in spec["volumes"] if v["name"] == "config")
        assert volume["configMap"]["name"] == configmap["metadata"]["name"]
        (item,) = volume["configMap"]["items"]
        assert item["key"] in configmap["data"]
        path = Path(mount["mountPath"]) / item["path"]
        assert path == SYSTEM_CONFIG, "the last entry of the config search"
        assert pod_env(doc, POD_NAMES[0])["LOCKCONSOLE_CONFIG"] == str(path)
        assert mount["readOnly"] is True


def test_the_configmaps_config_loads_with_the_secrets_password(tmp_path: Path) -> None:
    mounted = tmp_path / "config.toml"  # where the kubelet would put it
    mounted.write_text(config_text(), encoding="utf-8")
    for doc in workloads():
        env = {**pod_env(doc, POD_NAMES[0]), "LOCKCONSOLE_CONFIG": str(mounted)}
        config = load_config(None, env)  # the search, as the pod's environment steers it
        assert config.path == str(mounted)
        assert config.instance is None, "each pod's name comes from $LOCKCONSOLE_INSTANCE"
        url = config.databases["main"].url
        assert secret_env()["BILLING_DB_PASSWORD"] not in str(url)  # masked when shown
        assert url.masked.startswith("postgresql://billing:***@")
    with pytest.raises(ConfigError, match="BILLING_DB_PASSWORD is not set"):
        parse_config(config_text(), "config.toml", {})  # without the Secret: refused


def test_the_commands_parse_with_lockconsoles_parser() -> None:
    docs = documents()
    config = config_for_pod(docs["Deployment"])
    for doc, command in ((docs["Deployment"], "schedule"), (docs["CronJob"], "run")):
        argv = container(doc)["command"]
        assert argv[0] == "lockconsole" and "args" not in container(doc)
        args = build_parser(command_word(argv[1:])).parse_args(argv[1:])
        assert args.command == command
        names = [args.job] if command == "run" else args.job or list(config.jobs)
        for name in names:
            config.job(name)


def test_grace_periods_cover_the_stop_grace_of_the_jobs_each_pod_runs() -> None:
    docs = documents()
    config = config_for_pod(docs["Deployment"])
    every = max(job.stop_grace for job in config.jobs.values())
    cron_job = config.job(container(docs["CronJob"])["command"][2])
    for doc, longest in ((docs["Deployment"], every), (docs["CronJob"], cron_job.stop_grace)):
        grace = pod_spec(doc)["terminationGracePeriodSeconds"]
        assert grace > longest + EXIT_BOUND, (doc["kind"], grace, longest)
        assert pod_spec(doc)["shareProcessNamespace"] is True  # lockconsole is not PID 1


def test_the_deployment_runs_three_schedulers_without_probes() -> None:
    deployment = documents()["Deployment"]
    assert deployment["spec"]["replicas"] == 3
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert deployment["spec"]["selector"]["matchLabels"].items() <= labels.items()
    probes = {"livenessProbe", "readinessProbe", "startupProbe"}
    assert not probes & set(container(deployment)), "the README says why there are none"


def test_the_cronjob_fires_at_the_jobs_schedule() -> None:
    cronjob = documents()["CronJob"]
    job = config_for_pod(cronjob).job(container(cronjob)["command"][2])
    spec = cronjob["spec"]
    assert spec["schedule"] == job.schedule
    assert spec["timeZone"] == job.timezone
    assert spec["concurrencyPolicy"] == "Forbid"
    assert spec["jobTemplate"]["spec"]["backoffLimit"] == 0
    assert pod_spec(cronjob)["restartPolicy"] == "Never"
    at, gaps = datetime(2026, 1, 1, tzinfo=UTC), []
    for _ in range(20):
        following = next_fire(job, at)
        assert following is not None
        gaps.append(following - at)
        at = following
    # a Job that starts late must start before the next firing, or it runs the next slot
    assert timedelta(seconds=spec["startingDeadlineSeconds"]) < min(gaps[1:])


def test_the_cronjobs_pod_runs_once_for_a_firing_seen_by_three_clusters(
    own_database: str, tmp_path: Path
) -> None:
    """The CronJob's container as the kubelet would start it (its command, its environment,
    its mounted config), three pods for one firing: one runs the job, two skip."""
    cronjob = documents()["CronJob"]
    argv = container(cronjob)["command"]
    job = argv[2]
    text = config_text()
    # the database is this test's, the job's command one that exists here: nothing else changes
    host = re.search(r"@([^/]+)/billing", text).group(1)
    ours = own_database.split("://", 1)[1].split("@", 1)[1]
    text = text.replace(
        "billing:${BILLING_DB_PASSWORD}@" + host + "/billing",
        "postgres:${BILLING_DB_PASSWORD}@" + ours,
    )
    text = text.replace(
        '["python", "-m", "billing.nightly"]', f'["{sys.executable}", "-c", "pass"]'
    )
    mounted = tmp_path / "config.toml"
    mounted.write_text(text, encoding="utf-8")
    pods = [f"lockconsole-nightly-billing-29412360-{suffix}" for suffix in ("a1", "b2", "c3")]
    procs = []
    for pod in pods:
        env = {
            **pod_env(cronjob, pod),
            "LOCKCONSOLE_CONFIG": str(mounted),
            "PATH": str(LOCKCONSOLE.parent),
        }
        procs.append(
            subprocess.Popen(
                argv,
                env=env,
                cwd=tmp_path,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    codes = []
    for proc in procs:
        out, err = proc.communicate(timeout=60)
        assert secret_env()["BILLING_DB_PASSWORD"] not in out + err
        codes.append(proc.returncode)
    assert sorted(codes) == [0, 3, 3], codes
    with psycopg.connect(own_database) as conn:
        rows = conn.execute(
            "select instance, outcome from lockconsole_runs where job = %s", (job,)
        ).fetchall()
    assert sorted(rows) == sorted(
        (pod, "succeeded" if code == 0 else "skipped")
        for pod, code in zip(pods, codes, strict=True)
    )
