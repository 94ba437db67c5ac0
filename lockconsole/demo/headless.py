"""`lockconsole demo --headless --for SECONDS`: run the fleet, then print what happened.

While the fleet runs, one line per finished night; at the end a table of every night in the
ledger (history and live) with each instance's outcome, the acquired/skipped count per
instance, the stale holders, the duplicate invoices and the alerts, all read through the
Console facade, as the console would show them. `--json` prints one JSON object instead.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime
from typing import Any

from lockconsole.backends.ledger.store import Ledger
from lockconsole.console.facade import Console
from lockconsole.demo import BILLING_JOB, INSTANCES
from lockconsole.demo.fleet import Fleet
from lockconsole.demo.scenario import Scenario
from lockconsole.model.jobs import GOT_LOCK, Run
from lockconsole.model.story import story_dict
from lockconsole.model.views import SlotReport, Snapshot
from lockconsole.text.story import story_text

Write = Callable[[str], None]


def run(
    scenario: Scenario,
    fleet: Fleet,
    duration: float,
    *,
    as_json: bool,
    write: Write = print,
    progress: Write = print,
) -> int:
    """Let the fleet run for `duration` seconds, stop it, print the summary; exit code 0."""
    config = scenario.config
    ledger_db = config.ledger_for(config.job(BILLING_JOB))
    deadline = time.monotonic() + duration
    reported: set[datetime] = set()
    with Ledger(ledger_db) as ledger:
        while (left := deadline - time.monotonic()) > 0:
            time.sleep(min(0.5, left))
            runs = ledger.runs(BILLING_JOB, since=scenario.first_slot, limit=500)
            for slot, line in _finished_nights(runs, reported):
                reported.add(slot)
                progress(line)
        # the time is up: stop between nights, never while a billing run is under way
        cap = time.monotonic() + 2 * scenario.night_seconds
        while time.monotonic() < cap:
            runs = ledger.runs(BILLING_JOB, since=scenario.first_slot, limit=500)
            running = any(r.outcome == "acquired" for r in runs)
            if not running and _until_next_night(scenario.night_seconds) > NIGHT_MARGIN:
                break
            time.sleep(0.1)
    fleet.stop_instances()
    summary = collect(scenario)  # the stale holder is still there
    fleet.stop()
    # the version of this document, as every `--json` document carries (cli/output.py SCHEMA)
    write(json.dumps({"schema": 1, **summary}, indent=2) if as_json else render(summary))
    return 0


NIGHT_MARGIN = 1.0  # seconds before a night fires when the fleet is no longer stopped


def _until_next_night(night_seconds: int) -> float:
    """Seconds until the next night fires (nights are every `night_seconds`, from the minute)."""
    return night_seconds - time.time() % night_seconds


def _finished_nights(runs: list[Run], reported: set[datetime]) -> list[tuple[datetime, str]]:
    """Nights every instance has attempted and none is still running, not yet reported."""
    by_slot: dict[datetime, list[Run]] = {}
    for r in runs:
        if r.trigger == "scheduled":
            by_slot.setdefault(r.slot, []).append(r)
    out = []
    for slot in sorted(by_slot):
        group = sorted(by_slot[slot], key=lambda r: r.instance)
        done = len(group) >= len(INSTANCES) and all(r.outcome != "acquired" for r in group)
        if slot in reported or not done:
            continue
        who = "  ".join(f"{r.instance} {r.outcome}" for r in group)
        out.append((slot, f"night {slot:%H:%M:%S}  {who}"))
    return out


def collect(scenario: Scenario) -> dict[str, Any]:
    """What happened, from one Console snapshot: nights, counts, stale holders, duplicates."""
    with Console(scenario.config, read_only=True) as console:
        snap = console.snapshot(duplicates=True)
        dup = console.duplicate_summary(BILLING_JOB)
        # every attempt of each night, skips included (a slot report names who skipped only
        # when nobody ran): the demo's ledger is small enough to read whole
        attempts = console.history(BILLING_JOB, limit=5000)
        story = console.story(BILLING_JOB, scenario.incident_slot)  # the incident, told
    nights = sorted((r for r in snap.slots if r.job == BILLING_JOB), key=lambda r: r.slot)
    of_slot: dict[datetime, list[tuple[str, str]]] = {}
    for run in sorted(attempts, key=lambda r: (r.started_at, r.id or 0)):
        of_slot.setdefault(run.slot, []).append((run.instance, run.outcome))
    nights = [replace(r, outcomes=tuple(of_slot.get(r.slot, r.outcomes))) for r in nights]
    counts = {name: {"acquired": 0, "skipped": 0} for name in INSTANCES}
    for report in nights:
        if report.slot < scenario.first_slot:
            continue
        for instance, outcome in report.outcomes:
            kind = "acquired" if outcome in GOT_LOCK else "skipped"
            counts.setdefault(instance, {"acquired": 0, "skipped": 0})[kind] += 1
    return {
        "config": str(scenario.config_path),
        "night_seconds": scenario.night_seconds,
        "incident_slot": scenario.incident_slot.isoformat(),
        "first_slot": scenario.first_slot.isoformat(),
        "nights": [_night(r, scenario) for r in nights],
        "other_jobs": {
            job.name: [
                _night(r, scenario)
                for r in sorted(snap.slots, key=lambda r: r.slot)
                if r.job == job.name
            ]
            for job in scenario.config.jobs.values()
            if job.schedule and job.name != BILLING_JOB
        },
        "instances": counts,
        "stale_holders": _stale(snap),
        "duplicates": {
            "table": "invoices",
            "key": ["tenant_id", "period"],
            "groups": dup.groups,
            "surplus_rows": dup.surplus_rows,
            "has_unique_key": dup.has_unique_key,
        },
        "alerts": [{"kind": a.kind, "job": a.job, "message": a.message} for a in snap.alerts],
        "errors": dict(snap.errors),
        "incident_story": story_dict(story),
        "incident_story_text": story_text(story, None),
    }


def _night(report: SlotReport, scenario: Scenario) -> dict[str, Any]:
    live = report.slot >= scenario.first_slot
    return {
        "slot": report.slot.isoformat(),
        "live": live,
        "status": report.status,
        "acquired": report.acquired,
        "skipped": report.skipped,
        "outcomes": [list(pair) for pair in report.outcomes],
    }


def _stale(snap: Snapshot) -> list[dict[str, Any]]:
    return [
        {
            "job": h.job,
            "key": h.key,
            "pid": h.pid,
            "instance": h.instance,
            "application_name": h.application_name,
            "stale": h.stale,
        }
        for h in snap.holders
        if h.stale
    ]


def render(summary: dict[str, Any]) -> str:
    """The summary as plain text tables."""
    width = 11
    head = f"{'night (UTC)':<20}" + "".join(f"{n:<{width}}" for n in INSTANCES) + "status"
    lines = [f"{BILLING_JOB}: every night in the ledger", head, "-" * (len(head) + 12)]
    for night in summary["nights"]:
        outcomes = {i: o for i, o in night["outcomes"]}
        cells = "".join(f"{outcomes.get(n, '-'):<{width}}" for n in INSTANCES)
        if night["slot"] == summary["incident_slot"]:
            note = "  <- the triple charge, before the lock"
        else:
            note = "" if night["live"] else "  (history)"
        slot = datetime.fromisoformat(night["slot"]).strftime("%Y-%m-%d %H:%M:%S")
        lines.append(f"{slot:<20}{cells}{night['status']}{note}")
    for job, others in summary["other_jobs"].items():
        lines += ["", f"{job}: every night in the ledger"]
        for night in others:
            outcomes = {i: o for i, o in night["outcomes"]}
            cells = "".join(f"{outcomes.get(n, '-'):<{width}}" for n in INSTANCES)
            slot = datetime.fromisoformat(night["slot"]).strftime("%Y-%m-%d %H:%M:%S")
            lines.append(f"{slot:<20}{cells}{night['status']}")
    lines += ["", f"live fleet ({BILLING_JOB})  acquired  skipped"]
    for name, c in summary["instances"].items():
        lines.append(f"{name:<28}{c['acquired']:<10}{c['skipped']}")
    lines += ["", "stale holders:"]
    for h in summary["stale_holders"]:
        who = h["instance"] or h["application_name"]
        lines.append(f"  {h['job'] or 'key ' + h['key']} pid {h['pid']} ({who}): {h['stale']}")
    if not summary["stale_holders"]:
        lines.append("  none")
    d = summary["duplicates"]
    lines += [
        "",
        f"duplicates: {d['table']} has {d['groups']} duplicated "
        f"({', '.join(d['key'])}) keys, {d['surplus_rows']} surplus rows",
    ]
    lines += ["", "alerts:"] + [f"  [{a['kind']}] {a['message']}" for a in summary["alerts"]]
    for name, error in summary["errors"].items():
        lines.append(f"error on {name}: {error}")
    slot = summary["incident_slot"]
    lines += ["", f"the story of the incident night (lockconsole story {BILLING_JOB} {slot}):"]
    lines += summary["incident_story_text"].rstrip("\n").splitlines()
    return "\n".join(lines)
