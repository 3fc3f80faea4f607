"""Property: whatever is written, a consumer reading a cleaned log from the start reads what a
model says: the latest record of each key, and tombstones until their horizon (design §11)."""

from __future__ import annotations

import tempfile
from pathlib import Path

from cleaner_helpers import (
    NOW_MS,
    clean_fully,
    clean_once,
    compact_config,
    final_values,
    latest_records,
    write,
)
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples
from log_helpers import open_log, read_all

from odradek.cleaner.cleaner_config import CleanerConfig
from odradek.cleaner.skimpy_offset_map import BYTES_PER_ENTRY
from odradek.record.compression import CompressionType
from odradek.record.record import Record
from odradek.storage.unified_log import UnifiedLog

DAY_MS = 24 * 3_600_000
OLD_MS = NOW_MS - 3 * DAY_MS

writes = st.lists(
    st.tuples(st.integers(0, 9), st.one_of(st.none(), st.binary(min_size=1, max_size=40))),
    min_size=1,
    max_size=120,
)


def _segment_times(log: UnifiedLog, old: list[bool]) -> dict[int, int]:
    """Set each non-active segment's modification time, old or recent; by base offset."""
    times = {}
    for segment, is_old in zip(log.segments.non_active(), old, strict=False):
        times[segment.base_offset] = OLD_MS if is_old else NOW_MS
        segment.set_last_modified(times[segment.base_offset])
    return times


def _expected_after_horizon(
    log: UnifiedLog, kept: list[Record], times: dict[int, int]
) -> list[Record]:
    """``kept`` without the tombstones in segments modified at or before the horizon, which
    lies delete.retention.ms before the newest clean segment was last modified."""
    horizon = times[max(times)] - log.config.delete_retention_ms
    return [
        r
        for r in kept
        if r.value is not None or times[log.segments.floor_segment(r.offset).base_offset] > horizon
    ]


@settings(max_examples=examples(60), deadline=None)
@given(
    pairs=writes,
    per_batch=st.integers(1, 4),
    segment_bytes=st.integers(200, 1500),
    map_slots=st.integers(7, 40),
    codec=st.sampled_from([CompressionType.NONE, CompressionType.LZ4, CompressionType.GZIP]),
    data=st.data(),
)
def test_a_cleaned_log_reads_as_the_model_says(
    pairs, per_batch, segment_bytes, map_slots, codec, data
) -> None:
    config = compact_config(segment_bytes=segment_bytes, delete_retention_ms=DAY_MS)
    cleaner = CleanerConfig(dedupe_buffer_size=map_slots * BYTES_PER_ENTRY)
    with tempfile.TemporaryDirectory() as root, open_log(Path(root) / "t-0", config) as log:
        write(log, [(b"key-%d" % k, v) for k, v in pairs], per_batch, codec)
        log.roll()
        written = read_all(log)

        clean_fully(log, cleaner)  # the map may hold only a few keys: then in several runs
        cleaned = read_all(log)
        assert cleaned == latest_records(written)
        assert final_values(cleaned) == final_values(written)

        # tombstones stay until their segment is delete.retention.ms older than the clean
        # section's newest segment; set the segments' ages and clean a new dirty segment
        old = data.draw(st.lists(st.booleans(), min_size=log.number_of_segments))
        times = _segment_times(log, old)
        expected = _expected_after_horizon(log, cleaned, times)
        write(log, [(b"fresh", b"value")])
        log.roll()
        clean_once(log, cleaner, first_dirty=log.segments.non_active()[-1].base_offset)
        fresh = read_all(log)[-1]
        assert fresh.key == b"fresh"
        assert read_all(log) == [*expected, fresh]
        assert final_values(read_all(log)) == {**final_values(written), b"fresh": b"value"}
