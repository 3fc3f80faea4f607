"""Property: whatever is written, a consumer reading a cleaned log from the start reads what a
model says: the latest record of each key, and tombstones until their batch's delete horizon
(design §11)."""

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
from odradek.storage.unified_log import UnifiedLog

DAY_MS = 24 * 3_600_000
OLD_MS = NOW_MS - 3 * DAY_MS

writes = st.lists(
    st.tuples(st.integers(0, 9), st.one_of(st.none(), st.binary(min_size=1, max_size=40))),
    min_size=1,
    max_size=120,
)


def _age_segments(log: UnifiedLog, old: list[bool]) -> None:
    """Set each non-active segment's modification time, old or recent: they decide nothing."""
    for segment, is_old in zip(log.segments.non_active(), old, strict=False):
        segment.set_last_modified(OLD_MS if is_old else NOW_MS)


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

        # the cleanings at NOW_MS gave every tombstone's batch the horizon NOW_MS +
        # delete.retention.ms (Kafka's KIP-534); a cleaning of a new dirty segment before it
        # keeps them, one at or past it drops them, however old the segments look
        _age_segments(log, data.draw(st.lists(st.booleans(), min_size=log.number_of_segments)))
        past_horizon = data.draw(st.booleans())
        later_ms = NOW_MS + DAY_MS - (0 if past_horizon else 1)
        expected = [r for r in cleaned if r.value is not None or not past_horizon]
        write(log, [(b"fresh", b"value")])
        log.roll()
        last = log.segments.non_active()[-1].base_offset
        clean_once(log, cleaner, first_dirty=last, now_ms=later_ms)
        fresh = read_all(log)[-1]
        assert fresh.key == b"fresh"
        assert read_all(log) == [*expected, fresh]
        assert final_values(read_all(log)) == {**final_values(written), b"fresh": b"value"}
