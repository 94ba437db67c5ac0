"""A wall clock shifted for one process: PYTHONPATH=tests/support/clockshim and
LOCKCONSOLE_TEST_CLOCK_SHIFT=SECONDS (may be negative or fractional).

time.time(), time.time_ns() and datetime.now()/utcnow()/today() then run SECONDS ahead; the
monotonic clocks and every other process (the database server included) keep the real time.
This is what an instance with a skewed clock looks like to lockconsole: libfaketime does not
reach Python's datetime.now(), which reads the clock in C.
"""

from __future__ import annotations

import datetime as _dt
import os
import time as _time

_SHIFT = float(os.environ.get("LOCKCONSOLE_TEST_CLOCK_SHIFT", "0") or 0)

if _SHIFT:
    _real_time, _real_time_ns = _time.time, _time.time_ns
    _base = _dt.datetime
    _delta = _dt.timedelta(seconds=_SHIFT)

    def _time_shifted() -> float:
        return _real_time() + _SHIFT

    def _time_ns_shifted() -> int:
        return _real_time_ns() + int(_SHIFT * 1e9)

    class _AnyDatetime(type):
        """isinstance(x, datetime) holds for the real class's instances (drivers make those)."""

        def __instancecheck__(cls, obj: object) -> bool:
            return isinstance(obj, _base)

        def __subclasscheck__(cls, sub: type) -> bool:
            return issubclass(sub, _base)

    class _ShiftedDatetime(_base, metaclass=_AnyDatetime):
        """datetime whose now(), utcnow() and today() read the shifted clock."""

        __slots__ = ()  # the real class's size: C extensions that check it at import stay quiet

        @classmethod
        def now(cls, tz: _dt.tzinfo | None = None) -> _dt.datetime:  # type: ignore[override]  # plain, as arithmetic gives
            return _base.now(tz) + _delta

        @classmethod
        def utcnow(cls) -> _dt.datetime:  # type: ignore[override]  # plain, as arithmetic gives
            return _base.utcnow() + _delta

        @classmethod
        def today(cls) -> _dt.datetime:  # type: ignore[override]  # plain, as arithmetic gives
            return _base.today() + _delta

    _time.time, _time.time_ns = _time_shifted, _time_ns_shifted
    _dt.datetime = _ShiftedDatetime  # type: ignore[misc]  # the shim's point: replace the class
