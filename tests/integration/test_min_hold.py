"""min_hold on an advisory lock: a job that ends at once keeps the lock until min_hold has passed
since it was taken (measured on this host's monotonic clock, never stored), then lets it go."""

from __future__ import annotations

import time

import psycopg
import pytest

from lockconsole import run_once
from lockconsole.config.loader import parse_config

pytestmark = pytest.mark.usefixtures("empty_registry")


@pytest.mark.parametrize(("min_hold", "at_least"), [("2s", 1.95), (None, 0.0)])
def test_a_quick_job_keeps_the_lock_for_min_hold(pg_url, uid, min_hold, at_least):
    job = f"hold_{uid}"
    extra = f'min_hold = "{min_hold}"\n' if min_hold else ""
    config = parse_config(
        f'[databases.main]\nurl = "{pg_url}"\n[jobs.{job}]\nstrategy = "pg-session"\n'
        f'schedule = "0 2 * * *"\nonce_per_slot = false\n{extra}'
    )
    start = time.monotonic()
    with run_once(job, config=config, instance="web-1") as run:
        assert run.acquired
    took = time.monotonic() - start
    assert took >= at_least
    if min_hold is None:
        assert took < 1.95  # the control: without min_hold nothing waits
    with psycopg.connect(pg_url, autocommit=True) as other:  # let go after the hold
        key = config.job(job).key.int64()
        assert other.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone() == (True,)
