"""The stand-in facade answers what the CLI asks of a console (ConsoleFacade), like Console."""

from __future__ import annotations

from tools.sample_console import SampleConsole


def test_sample_find_holders_matches_granted_holders_only() -> None:
    console = SampleConsole()
    by_pid = console.find_holders(pid=31001)
    assert [(h.pid, h.job, h.granted) for h in by_pid] == [(31001, "nightly_billing", True)]
    assert console.find_holders(pid=31077) == []  # a waiter is never a release target
    by_job = console.find_holders(job="report_export", database="reports")
    assert [h.database for h in by_job] == ["reports"]
    assert console.find_holders(job="report_export", database="billing") == []
