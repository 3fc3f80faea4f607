"""SkimpyOffsetMap, BatchKeys, Throttler and segment grouping: the cleaner's building blocks."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from odradek.cleaner.batch_keys import BatchKeys
from odradek.cleaner.cleaner import group_segments_by_size
from odradek.cleaner.segment_snapshot import SegmentSnapshot
from odradek.cleaner.skimpy_offset_map import BYTES_PER_ENTRY, NOT_FOUND, SkimpyOffsetMap
from odradek.cleaner.throttler import Throttler
from odradek.errors import CorruptRecordError
from odradek.int_limits import INT32_MAX
from odradek.record.compression import CompressionType
from odradek.record.record import Record
from odradek.record.record_batch import RecordBatch
from odradek.record.record_batch_builder import build_batch

# --- SkimpyOffsetMap ---------------------------------------------------------------------------


def test_map_keeps_the_latest_offset_of_each_key() -> None:
    offset_map = SkimpyOffsetMap(64 * 1024)
    for offset, key in enumerate([b"a", b"b", b"a", b"c", b"a"]):
        offset_map.put(key, offset)
    assert [offset_map.get(k) for k in (b"a", b"b", b"c", b"d")] == [4, 1, 3, NOT_FOUND]
    assert offset_map.size == 3


def test_map_memory_bounds_its_entries_at_the_load_factor() -> None:
    offset_map = SkimpyOffsetMap(1000 * BYTES_PER_ENTRY, load_factor=0.9)
    assert offset_map.slots == 997  # the largest prime that fits: double hashing needs one
    assert offset_map.max_entries == int(997 * 0.9)
    for n in range(offset_map.max_entries):
        offset_map.put(b"key-%d" % n, n)
    assert offset_map.is_full
    assert offset_map.utilization == pytest.approx(0.9, abs=0.01)
    offset_map.put(b"key-7", 10_000)  # an existing key still updates
    assert offset_map.get(b"key-7") == 10_000
    with pytest.raises(ValueError, match="full"):
        offset_map.put(b"one more", 1)
    assert all(offset_map.get(b"key-%d" % n) in (n, 10_000) for n in range(offset_map.max_entries))


def test_a_tiny_map_still_finds_every_key_it_holds() -> None:
    offset_map = SkimpyOffsetMap(3 * BYTES_PER_ENTRY, load_factor=0.99)
    assert (offset_map.slots, offset_map.max_entries) == (3, 2)
    offset_map.put(b"x", 1)
    offset_map.put(b"y", 2)
    assert (offset_map.get(b"x"), offset_map.get(b"y"), offset_map.get(b"z")) == (1, 2, NOT_FOUND)


def test_clear_forgets_keys_and_the_latest_offset() -> None:
    offset_map = SkimpyOffsetMap(10 * BYTES_PER_ENTRY)
    offset_map.put(b"a", 5)
    offset_map.update_latest_offset(5)
    offset_map.clear()
    assert (offset_map.get(b"a"), offset_map.size, offset_map.latest_offset) == (NOT_FOUND, 0, -1)


def test_map_refuses_less_than_three_slots() -> None:
    with pytest.raises(ValueError):
        SkimpyOffsetMap(2 * BYTES_PER_ENTRY)


# --- BatchKeys ---------------------------------------------------------------------------------

_records = st.lists(
    st.tuples(
        st.integers(0, 2**40),
        st.one_of(st.none(), st.binary(max_size=300)),
        st.one_of(st.none(), st.binary(max_size=300)),
        st.lists(
            st.tuples(st.text(max_size=5), st.one_of(st.none(), st.binary(max_size=5))), max_size=2
        ),
    ),
    min_size=1,
    max_size=20,
)


@settings(max_examples=examples(60), deadline=None)
@given(
    _records,
    st.sampled_from(list(CompressionType)),
    st.integers(0, 2**40),
    st.lists(st.integers(1, 3000), min_size=20, max_size=20),
)
def test_batch_keys_agree_with_the_full_record_decoder(records, codec, base_offset, gaps) -> None:
    offsets = [base_offset + sum(gaps[:i]) for i in range(len(records))]
    batch = RecordBatch(
        build_batch(
            [
                Record(o, ts, k, v, tuple(h))
                for o, (ts, k, v, h) in zip(offsets, records, strict=True)
            ],
            compression=codec,
        )
    )
    keys = BatchKeys.read(batch)
    decoded = list(batch.records())
    assert keys.offsets == [r.offset for r in decoded]
    assert keys.keys == [r.key for r in decoded]
    assert keys.tombstones == [r.value is None for r in decoded]


def test_batch_keys_refuse_records_that_do_not_fill_the_batch() -> None:
    good = build_batch([(1, b"key", b"value", ())])
    short = bytearray(good)
    short[57:61] = (2).to_bytes(4, "big")  # recordsCount 2: the second record is missing
    with pytest.raises(CorruptRecordError):
        BatchKeys.read(RecordBatch(bytes(short)))
    long = bytearray(good)
    long[57:61] = (0).to_bytes(4, "big")  # recordsCount 0: bytes left over
    with pytest.raises(CorruptRecordError):
        BatchKeys.read(RecordBatch(bytes(long)))


# --- Throttler ---------------------------------------------------------------------------------


class FakeTime:
    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_throttler_sleeps_down_to_the_desired_rate() -> None:
    clock = FakeTime()
    throttler = Throttler(1000, check_interval_s=0.1, monotonic=clock.monotonic, sleep=clock.sleep)
    clock.now = 0.5
    throttler.maybe_throttle(2000)  # 2000 units in 0.5 s: should have taken 2 s
    assert clock.sleeps == [pytest.approx(1.5)]
    assert throttler.slept_s == pytest.approx(1.5)


def test_throttler_does_not_sleep_below_the_rate_or_within_an_interval() -> None:
    clock = FakeTime()
    throttler = Throttler(1000, check_interval_s=0.1, monotonic=clock.monotonic, sleep=clock.sleep)
    clock.now = 0.05
    throttler.maybe_throttle(10_000)  # too early to judge
    clock.now = 20.0
    throttler.maybe_throttle(0)  # 10000 units in 20 s is under the rate
    assert clock.sleeps == []


# --- grouping ----------------------------------------------------------------------------------


def _segment(base: int, size: int = 100, index: int = 8, time_index: int = 12) -> SegmentSnapshot:
    return SegmentSnapshot(base, size, index, time_index, 0)


def _bases(groups: list[list[SegmentSnapshot]]) -> list[list[int]]:
    return [[s.base_offset for s in group] for group in groups]


def test_groups_fit_segment_bytes() -> None:
    segments = [_segment(0, 400), _segment(10, 400), _segment(20, 300), _segment(30, 100)]
    groups = group_segments_by_size(segments, 1000, 4096, 40)
    assert _bases(groups) == [[0, 10], [20, 30]]


def test_groups_fit_the_index_size() -> None:
    by_offset_index = [_segment(0, index=64), _segment(10, index=64), _segment(20, index=64)]
    assert _bases(group_segments_by_size(by_offset_index, 10_000, 128, 30)) == [[0, 10], [20]]
    assert _bases(group_segments_by_size(by_offset_index, 10_000, 127, 30)) == [[0], [10], [20]]
    by_time_index = [_segment(0, time_index=96), _segment(10, time_index=96)]
    assert _bases(group_segments_by_size(by_time_index, 10_000, 191, 30)) == [[0], [10]]


def test_groups_keep_offsets_within_int32_of_the_base() -> None:
    top = INT32_MAX + 1
    segments = [_segment(0), _segment(top // 2), _segment(top - 1), _segment(top + 5)]
    # the third segment may hold offsets up to top + 4: beyond int32 of base 0
    assert _bases(group_segments_by_size(segments, 10**6, 4096, top + 10)) == [
        [0, top // 2],
        [top - 1, top + 5],
    ]
    empty = [_segment(0), _segment(5, size=0), _segment(top + 5)]
    assert _bases(group_segments_by_size(empty, 10**6, 4096, top + 10)) == [[0, 5], [top + 5]]
