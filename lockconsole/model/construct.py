"""Fast construction of the frozen model values on hot paths (10,000 holders, every attempt).

A frozen dataclass's __init__ costs ~3 us with 30 keyword arguments; at 10,000 locks that alone
is slower than the query. These plain dataclasses have no __post_init__ and no __slots__, so a
value made by setting its __dict__ equals the one __init__ makes. A class that gains either
falls back to __init__ / dataclasses.replace.
"""

from __future__ import annotations

import dataclasses
import gc
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

_T = TypeVar("_T")


_PLAIN: dict[type, bool] = {}


def plain(cls: type) -> bool:
    """True when `cls` may be built by setting its __dict__ (no __slots__, no __post_init__)."""
    known = _PLAIN.get(cls)
    if known is None:
        known = _PLAIN[cls] = not hasattr(cls, "__slots__") and not hasattr(cls, "__post_init__")
    return known


def construct(cls: type[_T], values: dict[str, Any]) -> _T:
    """cls(**values) without running __init__; `values` must hold every field (it is kept)."""
    if not plain(cls):
        return cls(**values)
    new = object.__new__(cls)
    object.__setattr__(new, "__dict__", values)
    return new


def evolve(value: _T, **changes: Any) -> _T:
    """dataclasses.replace without running __init__ again (5x faster); unknown names refused."""
    fields = value.__dict__
    unknown = changes.keys() - fields.keys()
    if unknown:
        raise TypeError(f"{type(value).__name__} has no field(s) {', '.join(sorted(unknown))}")
    if not plain(type(value)):
        return dataclasses.replace(value, **changes)  # type: ignore[type-var]
    return construct(type(value), {**fields, **changes})


def fill(value: _T, changes: dict[str, Any]) -> _T:
    """Set fields of a value that was just built for its caller and is not shared yet: the rest
    of its construction, in place (a copy of 10,000 holders costs as much as reading them). A
    class that is not plain gets a copy instead."""
    if not plain(type(value)):
        return dataclasses.replace(value, **changes)  # type: ignore[type-var]
    value.__dict__.update(changes)
    return value


@contextmanager
def gc_paused() -> Iterator[None]:
    """Pause the cyclic GC (if on) while many acyclic values are built; collections on the way
    would cost about a third of the time."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
