"""The race, for real: three OS processes start the same job in the same second; one runs."""

from __future__ import annotations

import json

import pytest

from tests.support.redis_fixture import redis_job_config
from tests.support.runner_helpers import (
    MARK_AND_SLEEP,
    STRATEGIES,
    STRATEGY_IDS,
    lockconsole,
    pg_job_config,
    runs_of,
)
from tests.support.settings import PYTHON


@pytest.mark.parametrize(("strategy", "db"), STRATEGIES, ids=STRATEGY_IDS)
def test_three_instances_one_runs(strategy, db, url_for, uid, write_config, cli_env, tmp_path):
    job = f"nightly_billing_{uid}"
    if strategy == "redis":  # the ledger stays in SQL
        config = write_config(redis_job_config(url_for("pg"), url_for(db), job))
    else:
        config = write_config(
            pg_job_config(url_for(db), job, strategy, lease_table=f"shedlock_{uid}")
        )
    marks = tmp_path / "marks"
    procs = [
        lockconsole(
            config,
            "run",
            job,
            "--instance",
            f"web-{i}",
            "--json",
            "--",
            PYTHON,
            "-c",
            MARK_AND_SLEEP,
            str(marks),
            "2",
            env=cli_env,
        )
        for i in (1, 2, 3)
    ]
    results = [(p.wait(timeout=60), *p.communicate()) for p in procs]
    codes = sorted(code for code, _, _ in results)
    assert codes == [0, 3, 3], results
    attempts = [json.loads(out) for _, out, _ in results]
    assert sorted(a["outcome"] for a in attempts) == ["skipped", "skipped", "succeeded"]
    assert marks.read_text().count("ran") == 1

    runs = runs_of(config, job)
    assert len(runs) == 3
    assert len({r.slot for r in runs}) == 1, "the three attempts share one slot"
    assert sorted(r.outcome for r in runs) == ["skipped", "skipped", "succeeded"]
    assert {r.instance for r in runs} == {"web-1", "web-2", "web-3"}
    winner = next(r for r in runs if r.outcome == "succeeded")
    assert winner.exit_code == 0 and winner.finished_at is not None
    if strategy in ("lease", "redis"):
        assert winner.fencing_token and winner.fencing_token >= 1
    else:
        assert winner.session_id, "the holder's backend pid / connection id is recorded"
