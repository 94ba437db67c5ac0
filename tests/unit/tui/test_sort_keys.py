"""The panes sort by what a cell shows (tui/widgets/sort_keys.py): times in the console's
formats by when, durations and ages by length, numbers by value, the rest by text; a job's own
text that only looks like a time never breaks the sort."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta

from lockconsole.text import times
from lockconsole.tui.widgets.sort_keys import cell_key
from lockconsole.tui.widgets.table_model import sorted_rows

TODAY = date(2026, 12, 1)


def order(cells: list[str], today: date = TODAY, descending: bool = False) -> list[str]:
    rows = [(str(i), [c]) for i, c in enumerate(cells)]
    return [cells[int(key)] for key, _ in sorted_rows(rows, (0, descending), today)]


def test_clocks_of_other_days_sort_before_today_and_stamps_by_when() -> None:
    assert order(["02:00:00", "11-28 23:30:00", "01:59:59", "11-30 02:00:00"]) == [
        "11-28 23:30:00",
        "11-30 02:00:00",
        "01:59:59",
        "02:00:00",
    ]
    # a clock of a day early in January, seen on the 1st, is this year; late December last year
    assert order(["01-01 00:00:10", "12-31 23:59:59"], today=date(2027, 1, 1)) == [
        "12-31 23:59:59",
        "01-01 00:00:10",
    ]
    assert order(["2026-11-30 02:00:00", "2025-12-01 03:00:00"]) == [
        "2025-12-01 03:00:00",
        "2026-11-30 02:00:00",
    ]


def test_the_consoles_own_clock_and_span_texts_sort_by_their_value() -> None:
    now = datetime(2026, 12, 1, 12, tzinfo=UTC)
    moments = [now - timedelta(days=d, minutes=m) for d, m in ((0, 5), (2, 0), (0, 90), (1, 1))]
    shown = [times.clock(m, now) for m in moments]
    assert order(shown) == [times.clock(m, now) for m in sorted(moments)]
    lengths = [timedelta(seconds=s) for s in (0.34, 4.2, 42, 845, 7380, 273600)]
    texts = [f"ok web-3 {times.span(d)} ago" for d in reversed(lengths)]
    assert order(texts) == [f"ok web-3 {times.span(d)} ago" for d in lengths]
    assert order(texts, descending=True) == texts


def test_numbers_by_value_text_last_and_lookalikes_do_not_break_the_sort() -> None:
    assert order(["10", "9", "100", "-", "never"]) == ["9", "10", "100", "-", "never"]
    hostile = ["job said 99:99:99", "2026-13-45 25:61:00", "00-00 00:00:00", "fine"]
    assert sorted(order(hostile)) == sorted(hostile)  # no error, every row kept
    assert cell_key("job said 99:99:99", TODAY)[0] == 2  # not a time: its text
