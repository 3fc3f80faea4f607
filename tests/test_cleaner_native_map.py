"""The cleaner with the C offset map and with the Python one: the same cleaned log, byte for
byte, and the same refusal of batches whose records do not frame."""

from __future__ import annotations

from pathlib import Path

import pytest
from cleaner_helpers import CLEANER, clean_once, compact_config, latest_records, plan, write
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples
from log_helpers import append, open_log, read_all

import odradek.cleaner.offset_map as offset_map_module
from odradek.cleaner.cleaner import Cleaner
from odradek.cleaner.cleaner_config import CleanerConfig
from odradek.cleaner.skimpy_offset_map import BYTES_PER_ENTRY
from odradek.errors import CorruptRecordError
from odradek.record.compression import CompressionType
from odradek.record.record_batch import RECORDS_OFFSET, write_crc
from odradek.record.record_batch_builder import build_batch
from odradek.storage import log_file_names as names
from odradek.storage.unified_log import UnifiedLog

NATIVE = offset_map_module.NativeOffsetMap


@pytest.fixture(params=["native", "python"])
def map_kind(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Runs the test once with each offset map."""
    if request.param == "python":
        monkeypatch.setattr(offset_map_module, "NativeOffsetMap", None)
    return request.param


def _segment_bytes(log: UnifiedLog) -> list[bytes]:
    return [names.log_file(log.dir, s.base_offset).read_bytes() for s in log.segments.values()]


def _corrupt_record_length(log: UnifiedLog) -> None:
    """Make the first record of the first batch claim more bytes than its batch holds, and
    give the batch a CRC that matches: only the record walk can find the fault."""
    path = names.log_file(log.dir, 0)
    data = bytearray(path.read_bytes())
    data[RECORDS_OFFSET] = 0x7E  # zigzag 63: longer than the record
    write_crc(data, 0)
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("pass_", ["map", "filter"])
def test_records_that_do_not_frame_fail_the_run(tmp_path: Path, map_kind: str, pass_: str) -> None:
    with open_log(tmp_path / "t-0", compact_config(segment_bytes=100_000)) as log:
        write(log, [(b"a", b"1"), (b"b", b"2")], per_batch=2)
        write(log, [(b"a", b"3"), (b"c", b"4")], per_batch=2)
        log.roll()
        # a fault below the first dirty offset is met only by the second pass
        first_dirty = 2 if pass_ == "filter" else None
        task = plan(log, first_dirty=first_dirty)
        _corrupt_record_length(log)
        with pytest.raises(CorruptRecordError, match="frame"):
            Cleaner(task).clean()
        assert not list(log.dir.glob("*.cleaned")) and not list(log.dir.glob("*.swap"))


def test_a_bad_crc_in_a_batch_decided_in_bulk_names_the_batch(
    tmp_path: Path, map_kind: str
) -> None:
    with open_log(tmp_path / "t-0", compact_config(segment_bytes=100_000)) as log:
        write(log, [(b"a", b"1" * 40), (b"b", b"2")], per_batch=2)
        write(log, [(b"a", b"3"), (b"b", b"4")], per_batch=2)
        log.roll()
        path = names.log_file(log.dir, 0)
        data = bytearray(path.read_bytes())
        data[RECORDS_OFFSET + 20] ^= 0xFF  # inside the first value: the record still frames
        path.write_bytes(bytes(data))
        with pytest.raises(CorruptRecordError, match="CRC mismatch"):
            Cleaner(plan(log)).clean()


_writes = st.lists(
    st.tuples(
        st.lists(
            st.tuples(
                st.one_of(st.integers(0, 12).map(lambda n: b"key-%d" % n), st.none()),
                st.one_of(st.none(), st.binary(min_size=1, max_size=60)),
            ),
            min_size=1,
            max_size=6,
        ),
        st.sampled_from([CompressionType.NONE] * 3 + [CompressionType.ZSTD]),
        st.sampled_from([None, None, 7, 8]),  # a plain batch, or idempotent producer 7's or 8's
    ),
    min_size=1,
    max_size=40,
)


@settings(max_examples=examples(25), deadline=None)
@given(_writes, st.sampled_from([8, 12, 1000]))
def test_both_maps_write_the_same_cleaned_log(tmp_path_factory, writes, map_entries) -> None:
    """Keyless records (from before the topic was compacted), tombstones, compressed batches,
    idempotent producers (their last batches keep their headers), small maps that fill up: the
    two maps leave identical segment files."""
    config = CleanerConfig(dedupe_buffer_size=map_entries * BYTES_PER_ENTRY)
    results = []
    for native in (True, False):
        directory = tmp_path_factory.mktemp("log") / "t-0"
        with open_log(directory, compact_config(cleanup_policy=("delete",))) as log:
            sequences = {7: 0, 8: 0}
            last_offsets = {}
            for records, codec, producer in writes:
                idempotent = {}
                if producer is not None:
                    idempotent = {
                        "producer_id": producer,
                        "producer_epoch": 0,
                        "base_sequence": sequences[producer],
                    }
                    sequences[producer] += len(records)
                append(
                    log,
                    build_batch(
                        [(1, k, v, ()) for k, v in records], compression=codec, **idempotent
                    ),
                )
                if producer is not None:
                    last_offsets[producer] = log.log_end_offset - 1
            log.update_config(compact_config())
            log.roll()
            saved = offset_map_module.NativeOffsetMap
            offset_map_module.NativeOffsetMap = NATIVE if native else None
            try:
                outcome = clean_once(log, config).end_offset
            except Exception as error:  # compared below, not hidden
                outcome = type(error).__name__
            finally:
                offset_map_module.NativeOffsetMap = saved
            results.append((outcome, _segment_bytes(log)))
            kept = {
                (batch.producer_id, batch.last_offset)
                for segment in log.segments.values()
                for _, batch in segment.log.batches()
            }
            assert set(last_offsets.items()) <= kept, "a live producer's last batch went"
    assert results[0] == results[1]


def test_a_large_log_keeps_the_latest_of_each_key(tmp_path: Path, map_kind: str) -> None:
    with open_log(tmp_path / "t-0", compact_config(segment_bytes=64 * 1024)) as log:
        write(log, [(b"key-%d" % (n % 50), b"v%d" % n) for n in range(2000)], per_batch=16)
        log.roll()
        before = read_all(log)
        clean_once(log, CLEANER)
        assert read_all(log) == latest_records(before)
