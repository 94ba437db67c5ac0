"""The MySQL protocol pieces the run path's answer reader parses itself (backends/mysql/answers.py):
length-encoded integers and text-protocol rows, on bytes built here as the server sends them."""

from __future__ import annotations

import pytest

from lockconsole.backends.mysql.answers import _length, _row


def _lenenc(value: int) -> bytes:
    if value < 0xFB:
        return bytes([value])
    if value < 1 << 16:
        return b"\xfc" + value.to_bytes(2, "little")
    if value < 1 << 24:
        return b"\xfd" + value.to_bytes(3, "little")
    return b"\xfe" + value.to_bytes(8, "little")


@pytest.mark.parametrize("value", [0, 1, 250, 251, 0xFFFF, 0x10000, 0xFFFFFF, 0x1000000, 2**63])
def test_a_length_encoded_integer_reads_back_with_the_offset_after_it(value):
    data = b"\x07" + _lenenc(value) + b"tail"
    assert _length(data, 1) == (value, len(data) - 4)


def test_a_row_reads_text_nulls_empties_and_long_values_exactly():
    odd = "wéb-1 \"q\" 'x' \\ \t\x01\x1f\x7f\ufeff ☃ 😀"
    long = "x" * 70000  # its length takes three bytes
    values = [odd, None, "", long, "[1, null]"]
    data = b"".join(b"\xfb" if v is None else _lenenc(len(v.encode())) + v.encode() for v in values)
    assert _row(data, "utf8") == tuple(values)
