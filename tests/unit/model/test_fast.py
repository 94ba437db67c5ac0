"""model/construct.py: values built without __init__ equal the ones __init__ builds."""

from __future__ import annotations

import dataclasses
import gc
from datetime import UTC, datetime
from typing import Any

import pytest

from lockconsole.model.construct import construct, evolve, gc_paused, plain
from lockconsole.model.jobs import Run
from lockconsole.model.views import Holder

T0 = datetime(2026, 11, 27, 2, 0, tzinfo=UTC)


def _holder_fields() -> dict[str, Any]:
    made = Holder(
        database="main",
        kind="advisory",
        key="42",
        key_kind="int64",
        granted=True,
        source="pg_locks",
        pid=7,
    )
    return dict(made.__dict__)


def test_construct_equals_init_and_stays_frozen() -> None:
    values = _holder_fields()
    built = construct(Holder, dict(values))
    assert built == Holder(**values) and hash(built) == hash(Holder(**values))
    with pytest.raises(dataclasses.FrozenInstanceError):
        built.pid = 8  # type: ignore[misc]  # the write the test expects to fail


def test_evolve_changes_only_what_it_names() -> None:
    run = Run(
        job="j",
        slot=T0,
        instance="a",
        host="h",
        pid=1,
        trigger="scheduled",
        outcome="acquired",
        started_at=T0,
    )
    done = evolve(run, outcome="succeeded", exit_code=0)
    assert done == dataclasses.replace(run, outcome="succeeded", exit_code=0)
    assert run.outcome == "acquired"
    with pytest.raises(TypeError, match="no field"):
        evolve(run, nonsense=1)


def test_a_class_with_post_init_is_built_by_init() -> None:
    @dataclasses.dataclass(frozen=True)
    class Checked:
        n: int

        def __post_init__(self) -> None:
            if self.n < 0:
                raise ValueError("negative")

    assert not plain(Checked) and plain(Holder)
    with pytest.raises(ValueError):
        construct(Checked, {"n": -1})
    with pytest.raises(ValueError):
        evolve(Checked(1), n=-1)


def test_gc_paused_restores_the_collector() -> None:
    assert gc.isenabled()
    with gc_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with gc_paused():
            assert not gc.isenabled()
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_fill_completes_a_fresh_value_in_place_and_copies_a_slotted_one() -> None:
    from lockconsole.model.construct import fill

    built = construct(Holder, _holder_fields())
    filled = fill(built, {"held_since": T0, "held_from": "at_least"})
    assert filled is built  # in place: no second copy of a value nobody holds yet
    assert filled == dataclasses.replace(
        Holder(**_holder_fields()),
        held_since=T0,
        held_from="at_least",
    )

    @dataclasses.dataclass(frozen=True, slots=True)
    class Slotted:
        a: int
        b: int = 0

    one = Slotted(1)
    other = fill(one, {"b": 2})
    assert other == Slotted(1, 2) and one.b == 0  # not plain: copied, the original kept
