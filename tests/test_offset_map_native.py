"""The C offset map (_offset_map.c) agrees with the Python one (SkimpyOffsetMap, batch_scan.py)
on every input, corrupt ones included, and never reads outside its buffer."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from odradek.cleaner import batch_scan
from odradek.cleaner.batch_keys import records_section
from odradek.cleaner.offset_map import NativeOffsetMap, create_offset_map
from odradek.cleaner.skimpy_offset_map import BYTES_PER_ENTRY, SkimpyOffsetMap
from odradek.errors import CorruptRecordError
from odradek.record.compression import CompressionType
from odradek.record.memory_records import MemoryRecords
from odradek.record.record import Record
from odradek.record.record_batch import RECORDS_OFFSET, RecordBatch
from odradek.record.record_batch_builder import build_batch

KEYS = [b"", b"a", b"b", b"key-1", b"key-2", b"k" * 300, None]


def test_the_c_map_is_built() -> None:
    """CI has a C compiler: the cleaner must not fall back to Python there unnoticed."""
    assert NativeOffsetMap is not None
    assert isinstance(create_offset_map(1000 * BYTES_PER_ENTRY, 0.9), NativeOffsetMap)
    assert isinstance(create_offset_map(1000, 0.9, native=False), SkimpyOffsetMap)


def _pair(memory: int = 200 * BYTES_PER_ENTRY, load_factor: float = 0.9) -> tuple:
    return (
        create_offset_map(memory, load_factor),
        create_offset_map(memory, load_factor, native=False),
    )


def _state(offset_map, keys) -> tuple:
    return (
        offset_map.size,
        offset_map.is_full,
        offset_map.latest_offset,
        [offset_map.get(k) for k in keys],
    )


@settings(max_examples=examples(100), deadline=None)
@given(
    st.lists(st.tuples(st.binary(max_size=300), st.integers(0, 2**62)), max_size=60),
    st.integers(3, 40),
)
def test_put_and_get_agree_up_to_a_full_map(puts, slots) -> None:
    native, python = _pair(slots * BYTES_PER_ENTRY)
    assert (native.slots, native.max_entries) == (python.slots, python.max_entries)
    for key, offset in puts:
        outcomes = []
        for offset_map in (native, python):
            try:
                offset_map.put(key, offset)
                outcomes.append(None)
            except ValueError as error:
                outcomes.append(str(error))
        assert outcomes[0] == outcomes[1]
    keys = [k for k, _ in puts] + [b"absent"]
    assert _state(native, keys) == _state(python, keys)
    native.clear()
    assert (native.size, native.get(keys[0]), native.latest_offset) == (0, -1, -1)


def test_negative_offsets_are_refused() -> None:
    for offset_map in _pair():
        with pytest.raises(ValueError):
            offset_map.put(b"k", -1)


_record = st.tuples(st.sampled_from(KEYS), st.one_of(st.none(), st.binary(max_size=30)))
_batch = st.tuples(
    st.lists(_record, min_size=1, max_size=8),
    st.sampled_from([CompressionType.NONE] * 3 + [CompressionType.GZIP, CompressionType.LZ4]),
    st.integers(-2, 3),  # gap before the batch; below 0, offsets that come again
    st.sampled_from([None, None, 1000, 2000]),  # its delete horizon
    st.sampled_from(["plain"] * 3 + ["transactional", "control"]),  # both walks stop at the
    # last two (the cleaner follows the transactions in Python)
)
# Cleaning times before, at and past those horizons.
_now = st.sampled_from([0, 999, 1000, 2000, 5000])


def _chunk(batches) -> tuple[bytes, list[bytes]]:
    """The batches laid end to end at increasing offsets, some records with headers."""
    offset = 0
    parts = []
    for records, codec, gap, *rest in batches:
        horizon = rest[0] if rest else None
        kind = rest[1] if len(rest) > 1 else "plain"
        offset = max(0, offset + gap)
        built = build_batch(
            [
                Record(offset + i, 1000 + i, key, value, (("h", b"v"),) if i % 3 else ())
                for i, (key, value) in enumerate(records)
            ],
            compression=codec,
            delete_horizon_ms=horizon,
            producer_id=-1 if kind == "plain" else 7,
            producer_epoch=-1 if kind == "plain" else 0,
            base_sequence=-1 if kind == "plain" else 0,
            is_transactional=kind != "plain",
            is_control=kind == "control",
        )
        parts.append(built)
        offset += len(records)
    return b"".join(parts), parts


def _run_map_batches(offset_map, chunk: bytes, start: int) -> list:
    """What map_batches reports, call after call, handling each OTHER batch as the cleaner
    does (its records section through map_records)."""
    position, reports = 0, []
    while True:
        progress = tuple(offset_map.map_batches(chunk, position, len(chunk), start))
        reports.append(progress)
        position, status = progress[0], progress[1]
        if status != batch_scan.OTHER:
            return reports
        batch = RecordBatch(chunk, position)
        data, at = records_section(batch)
        outcome = offset_map.map_records(
            data, at, len(data), batch.records_count, batch.base_offset, start
        )
        reports.append(("records", outcome))
        if outcome != batch_scan.END:
            return reports
        offset_map.latest_offset = batch.last_offset
        position += batch.size_in_bytes


def _run_filter_batches(offset_map, chunk: bytes, now_ms: int) -> list:
    position, reports = 0, []
    while True:
        progress = tuple(offset_map.filter_batches(chunk, position, len(chunk), now_ms))
        reports.append(progress)
        position, status = progress[0], progress[1]
        if status != batch_scan.OTHER:
            return reports
        batch = RecordBatch(chunk, position)
        data, at = records_section(batch)
        retain_deletes = batch_scan.retains_deletes(batch.delete_horizon_ms, now_ms)
        reports.append(
            offset_map.retain_records(
                data, at, len(data), batch.records_count, batch.base_offset, retain_deletes
            )
        )
        position += batch.size_in_bytes


@settings(max_examples=examples(150), deadline=None)
@given(
    st.lists(_batch, min_size=1, max_size=8),
    st.integers(0, 10),
    st.integers(3, 12),
    _now,
    st.integers(-1, 40),
    st.integers(0, 50),
)
def test_bulk_operations_agree_on_valid_batches(
    batches, start, slots, now_ms, latest, tracked
) -> None:
    """Whether or not the C map tracks records (all, some, or none of those mapped), small
    maps that fill, offsets that come again, a latest offset moved past what was mapped,
    batches with and without delete horizons cleaned before, at and past them."""
    chunk, _ = _chunk(batches)
    native, python = _pair(slots * BYTES_PER_ENTRY)
    for offset_map in (native, python):
        offset_map.track_records(start, tracked)
    assert _run_map_batches(native, chunk, start) == _run_map_batches(python, chunk, start)
    assert _state(native, KEYS[:-1]) == _state(python, KEYS[:-1])
    for offset_map in (native, python):
        offset_map.latest_offset = max(offset_map.latest_offset, latest)
    filtered = _run_filter_batches(native, chunk, now_ms)
    assert filtered == _run_filter_batches(python, chunk, now_ms)


def test_filter_batches_reports_runs_of_whole_batches() -> None:
    chunk, parts = _chunk(
        [([(b"a", b"1")], CompressionType.NONE, 0)] * 2
        + [([(b"b", b"2")], CompressionType.NONE, 0)] * 2
        + [([(b"a", b"3")], CompressionType.NONE, 0)]
    )
    for offset_map in _pair():
        for offset, key in [(1, b"a"), (3, b"b")]:
            offset_map.put(key, offset)
        offset_map.latest_offset = 3  # offset 4 lies past the map: kept whatever its key
        progress = batch_scan.FilterProgress._make(
            offset_map.filter_batches(chunk, 0, len(chunk), 0)
        )
        size = len(parts[0])
        assert progress.position == len(chunk) and progress.status == batch_scan.END
        assert progress.kept_spans == [(size, 2 * size), (3 * size, 5 * size)]
        assert (progress.records_read, progress.records_kept, progress.last_kept_offset) == (
            5,
            3,
            4,
        )


@pytest.mark.parametrize("where", ["crc", "attributes", "last record"])
def test_filter_batches_stops_at_a_batch_whose_crc_does_not_match(where: str) -> None:
    """Every byte from the attributes on is covered, whether the batch would be kept or
    dropped; the cleaner then has the batch checked one at a time, which names the fault."""
    chunk, parts = _chunk([([(b"a", b"1"), (b"b", b"2")], CompressionType.NONE, 0)] * 3)
    size = len(parts[0])
    flipped = {"crc": size + 17, "attributes": size + 22, "last record": 2 * size - 1}[where]
    corrupt = bytearray(chunk)
    corrupt[flipped] ^= 0x01
    for offset_map in _pair():
        offset_map.put(b"a", 2)  # the first batch would be dropped, the second kept
        offset_map.put(b"b", 3)
        offset_map.latest_offset = 3
        progress = batch_scan.FilterProgress._make(
            offset_map.filter_batches(bytes(corrupt), 0, len(chunk), 0)
        )
        assert (progress.position, progress.status) == (size, batch_scan.OTHER)
        assert (progress.records_read, progress.bytes_read) == (2, size)
        assert progress.kept_spans == []
        with pytest.raises(CorruptRecordError, match="CRC mismatch"):
            RecordBatch(bytes(corrupt), size).ensure_valid()


def _mutate(data: bytes, seed: int) -> bytes:
    """``data`` with a few bytes changed, a slice cut out or the end cut off."""
    rng = random.Random(seed)
    mutated = bytearray(data)
    kind = rng.randrange(3)
    if kind == 0:
        for _ in range(rng.randint(1, 4)):
            mutated[rng.randrange(len(mutated))] = rng.choice([0, 1, 0x7F, 0x80, 0xFF, 2, 3])
    elif kind == 1:
        start = rng.randrange(len(mutated))
        del mutated[start : start + rng.randint(1, 8)]
    else:
        del mutated[rng.randrange(len(mutated)) :]
    return bytes(mutated)


@settings(max_examples=examples(300), deadline=None)
@given(
    st.lists(_batch.map(lambda b: (b[0], CompressionType.NONE, *b[2:])), min_size=1, max_size=5),
    st.integers(0, 2**32),
    _now,
)
def test_bulk_operations_agree_on_corrupt_batches(batches, seed, now_ms) -> None:
    """Whatever the bytes, both maps report the same and the C map reads nothing outside its
    buffer (a bad read would crash this process or show under valgrind/ASan)."""
    chunk = _mutate(_chunk(batches)[0], seed)
    native, python = _pair(6 * BYTES_PER_ENTRY)
    for offset_map in (native, python):
        offset_map.track_records(0, 64)
    position = 0
    reports = []
    for offset_map in (native, python):
        reports.append(offset_map.map_batches(chunk, position, len(chunk), 0))
    assert tuple(reports[0]) == tuple(reports[1])
    assert _state(native, KEYS[:-1]) == _state(python, KEYS[:-1])
    filtered = [tuple(m.filter_batches(chunk, 0, len(chunk), now_ms)) for m in (native, python)]
    assert filtered[0] == filtered[1]
    # the records section of the first batch read as one batch's records, any count
    section = chunk[RECORDS_OFFSET:]
    for count in (0, 1, 3, 8, -1, 2**31 - 1):
        outcomes = [m.map_records(section, 0, len(section), count, 5, 0) for m in (native, python)]
        assert outcomes[0] == outcomes[1]
        retained = [
            m.retain_records(section, 0, len(section), count, 5, now_ms < 1000)
            for m in (native, python)
        ]
        assert retained[0] == retained[1]
    assert _state(native, KEYS[:-1]) == _state(python, KEYS[:-1])


def _headers_only(chunk: bytes) -> bytes:
    """``chunk`` with everything but each batch's header overwritten: records, CRCs and all."""
    blanked = bytearray(chunk)
    for batch in MemoryRecords(chunk).batches():
        start = batch.position
        blanked[start + 17 : start + 21] = bytes(4)  # the CRC
        blanked[start + RECORDS_OFFSET : start + batch.size_in_bytes] = bytes(
            batch.size_in_bytes - RECORDS_OFFSET
        )
    return bytes(blanked)


def test_tracked_batches_are_decided_without_reading_them_again() -> None:
    """After map_batches checked and settled their records, filter_batches decides the
    batches from their headers alone: the second pass does not read the dirty section again."""
    chunk, parts = _chunk(
        [([(b"a", b"1"), (b"b", b"2")], CompressionType.NONE, 0)] * 2
        + [([(b"a", b"3"), (b"c", b"4")], CompressionType.NONE, 0)]
    )
    native = create_offset_map(200 * BYTES_PER_ENTRY, 0.9)
    native.track_records(0, 100)
    assert native.map_batches(chunk, 0, len(chunk), 0)[:2] == (len(chunk), batch_scan.END)
    size = len(parts[0])
    # all of the first batch superseded; the second keeps b, not a: Python rebuilds it
    first = native.filter_batches(_headers_only(chunk), 0, len(chunk), 0)
    assert first[:3] == (size, batch_scan.OTHER, [])
    # none of the third superseded
    progress = batch_scan.FilterProgress._make(
        native.filter_batches(_headers_only(chunk), 2 * size, len(chunk), 0)
    )
    assert progress.status == batch_scan.END and progress.kept_spans == [(2 * size, 3 * size)]
    python = create_offset_map(200 * BYTES_PER_ENTRY, 0.9, native=False)
    python.map_batches(chunk, 0, len(chunk), 0)
    assert python.filter_batches(chunk, 0, len(chunk), 0) == first


@pytest.mark.parametrize(
    "what",
    ["untracked", "a tombstone", "a record without a key", "offsets again"],
)
def test_batches_the_tracked_bits_do_not_settle_are_read(what: str) -> None:
    """With their records blanked out, such batches are refused (CRC): they were read."""
    records = [(b"a", b"1"), (b"b", b"2")]
    batches = [(records, CompressionType.NONE, 0), ([(b"c", b"3")], CompressionType.NONE, 0)]
    if what == "a tombstone":
        batches[1] = ([(b"c", None)], CompressionType.NONE, 0)
    elif what == "a record without a key":
        batches[1] = ([(None, b"3")], CompressionType.NONE, 0)
    elif what == "offsets again":
        batches.append(([(b"d", b"4")], CompressionType.NONE, -2))
    chunk, parts = _chunk(batches)
    native = create_offset_map(200 * BYTES_PER_ENTRY, 0.9)
    native.track_records(0, 0 if what == "untracked" else 100)
    _run_map_batches(native, chunk, 0)
    second = len(parts[0])
    progress = native.filter_batches(_headers_only(chunk), second, len(chunk), 0)
    assert progress[:2] == (second, batch_scan.OTHER)


def test_spans_outside_the_buffer_are_refused() -> None:
    native, _ = _pair()
    for position, end in [(-1, 5), (0, 11), (6, 5)]:
        with pytest.raises(ValueError):
            native.map_batches(b"0123456789", position, end, 0)
        with pytest.raises(ValueError):
            native.filter_batches(b"0123456789", position, end, 0)


def _filtered(batches, now_ms: int, latest: int) -> list[batch_scan.FilterProgress]:
    """filter_batches over ``batches`` by both maps, with every key's latest offset mapped up
    to ``latest``."""
    chunk, _ = _chunk(batches)
    progress = []
    for offset_map in _pair():
        for batch in MemoryRecords(chunk).batches():
            for record in batch.records():
                if record.offset <= latest:
                    offset_map.put(record.key, record.offset)
        offset_map.latest_offset = latest
        progress.append(
            batch_scan.FilterProgress._make(offset_map.filter_batches(chunk, 0, len(chunk), now_ms))
        )
    assert progress[0] == progress[1]
    return progress


@pytest.mark.parametrize("latest", [5, -1])  # mapped, or every batch past the map
def test_a_kept_tombstone_without_a_delete_horizon_is_left_to_python(latest: int) -> None:
    """The batch keeps all its records but must be rewritten with a horizon (Kafka's
    ``filterTo``): the bulk walk stops there, at any time, also past the map's offsets."""
    batches = [([(b"a", b"1")], CompressionType.NONE, 0), ([(b"b", None)], CompressionType.NONE, 0)]
    for now_ms in (0, 10**13):
        progress = _filtered(batches, now_ms, latest)[0]
        first = len(_chunk(batches)[1][0])
        assert (progress.position, progress.status, progress.kept_spans) == (
            first,
            batch_scan.OTHER,
            [(0, first)],
        )


@pytest.mark.parametrize(("now_ms", "kept"), [(1999, True), (2000, False), (2001, False)])
def test_tombstones_stay_until_their_batchs_delete_horizon(now_ms: int, kept: bool) -> None:
    """A batch with a horizon keeps its tombstones, as it is, while the cleaning's time is
    before the horizon, and loses them at and after it (Kafka's ``shouldRetainRecord``)."""
    batches = [([(b"a", None), (b"b", None)], CompressionType.NONE, 0, 2000)]
    size = len(_chunk(batches)[0])
    progress = _filtered(batches, now_ms, 5)[0]
    assert progress.status == batch_scan.END
    assert progress.kept_spans == ([(0, size)] if kept else [])
    assert progress.records_kept == (2 if kept else 0)


def test_a_batch_with_a_horizon_past_the_map_is_kept_as_it_is() -> None:
    batches = [([(b"a", None)], CompressionType.NONE, 0, 2000)]
    progress = _filtered(batches, 5000, -1)[0]
    assert progress.kept_spans == [(0, len(_chunk(batches)[0]))]
