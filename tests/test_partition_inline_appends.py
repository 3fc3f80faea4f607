"""Which appends Partition runs on the event loop: its header check for one uncompressed
batch gives the answer the general rule (size, then the bounded decompression walk) gives."""

from __future__ import annotations

import pytest

from odradek.record.compression import CompressionType
from odradek.record.record_batch import decompresses_within
from odradek.record.record_batch_builder import build_batch
from odradek.server.partition import (
    INLINE_APPEND_MAX_BYTES,
    INLINE_DECOMPRESSED_MAX_BYTES,
    _runs_inline,
)


def _batch(values: list[bytes], compression: CompressionType = CompressionType.NONE) -> bytes:
    return build_batch([(0, None, value, ()) for value in values], compression=compression)


SHAPES = {
    "one small batch": _batch([b"v" * 100]),
    "one batch of many records": _batch([b"r" * 50] * 200),
    "two batches": _batch([b"a"]) + _batch([b"b"]),
    "uncompressed then expanding": _batch([b"a"]) + _batch([bytes(300_000)], CompressionType.GZIP),
    "compressed, small": _batch([b"v" * 100], CompressionType.GZIP),
    "compressed, expanding far": _batch([bytes(300_000)], CompressionType.GZIP),
    "too large": _batch([b"x" * (INLINE_APPEND_MAX_BYTES + 1)]),
    "cut short": _batch([b"v" * 100])[:-5],
    "header only": _batch([b"v"])[:61],
    "empty": b"",
}


@pytest.mark.parametrize("name", SHAPES)
@pytest.mark.parametrize("view", [False, True])
def test_the_inline_check_answers_as_the_general_rule(name: str, view: bool) -> None:
    records = SHAPES[name]
    expected = len(records) <= INLINE_APPEND_MAX_BYTES and decompresses_within(
        records, INLINE_DECOMPRESSED_MAX_BYTES
    )
    assert _runs_inline(memoryview(records) if view else records) == expected


def test_the_shapes_include_both_answers() -> None:
    answers = {_runs_inline(records) for records in SHAPES.values()}
    assert answers == {True, False}
