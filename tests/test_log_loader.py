"""Loading and recovery (design §8): every test builds a broken state on disk and checks the
result."""

from __future__ import annotations

import itertools
import os
import struct
from pathlib import Path

import pytest
from log_helpers import append, batch, open_log, read_all

from odradek.clock import MockClock
from odradek.config.log_config import LogConfig
from odradek.record.memory_records import MemoryRecords
from odradek.storage import log_file_names as names
from odradek.storage.log_segment import LogSegment
from odradek.storage.scheduler import Scheduler
from odradek.storage.unified_log import UnifiedLog

CONFIG = LogConfig(segment_bytes=1024, index_interval_bytes=64, segment_index_bytes=4096)


def write_log(directory: Path, batches: int = 30, records_per_batch: int = 2) -> list[bytes]:
    """Append ``batches`` batches, flush, and stop as a crash would (no trimming, no marker)."""
    scheduler = Scheduler()
    scheduler.startup()
    log = UnifiedLog.open(directory, CONFIG, scheduler, clock=MockClock())
    values = []
    for n in range(batches):
        batch_values = [f"v{n}-{i}".encode() for i in range(records_per_batch)]
        append(log, batch(values=batch_values))
        values.extend(batch_values)
    log.flush()
    log.close_handlers()
    scheduler.shutdown()
    return values


def reopen(directory: Path, **kwargs) -> UnifiedLog:
    scheduler = Scheduler()
    scheduler.startup()
    return UnifiedLog.open(directory, CONFIG, scheduler, clock=MockClock(), **kwargs)


def log_files(directory: Path) -> list[Path]:
    return sorted(directory.glob("*.log"))


def segment_base(path: Path) -> int:
    return names.offset_from_file_name(path.name)


@pytest.fixture
def partition_dir(tmp_path: Path) -> Path:
    return tmp_path / "orders-0"


def test_clean_reopen_keeps_everything(partition_dir: Path) -> None:
    values = write_log(partition_dir)
    assert len(log_files(partition_dir)) > 2
    log = reopen(partition_dir)
    assert [r.value for r in read_all(log)] == values
    assert log.log_end_offset == len(values)
    assert log.recovery_point == 0  # a start after a crash keeps the checkpoint's
    log.flush()
    assert log.recovery_point == len(values)
    log.close()


def test_torn_tail_is_truncated(partition_dir: Path) -> None:
    values = write_log(partition_dir)
    last = log_files(partition_dir)[-1]
    size = last.stat().st_size
    os.truncate(last, size - 7)  # the last batch loses its end: a write torn by a crash
    log = reopen(partition_dir)
    assert last.stat().st_size < size - 7
    records = read_all(log)
    assert [r.value for r in records] == values[: len(records)]
    assert len(records) == len(values) - 2  # exactly the torn batch is gone
    assert log.log_end_offset == len(records)
    log.close()


def test_garbage_tail_is_truncated(partition_dir: Path) -> None:
    values = write_log(partition_dir)
    last = log_files(partition_dir)[-1]
    size = last.stat().st_size
    with open(last, "ab") as file:
        file.write(os.urandom(300))
    log = reopen(partition_dir)
    assert last.stat().st_size == size
    assert [r.value for r in read_all(log)] == values
    log.close()


def test_zero_filled_tail_is_truncated(partition_dir: Path) -> None:
    values = write_log(partition_dir)
    last = log_files(partition_dir)[-1]
    size = last.stat().st_size
    with open(last, "ab") as file:
        file.write(bytes(4096))  # preallocated or unwritten pages after a crash
    log = reopen(partition_dir)
    assert last.stat().st_size == size
    assert [r.value for r in read_all(log)] == values
    log.close()


@pytest.mark.parametrize("residue", [bytes(1024), b"\x00" * 71, b"\xff" * 40])
def test_a_middle_segment_cut_after_its_last_batch_keeps_the_segments_after_it(
    partition_dir: Path, residue: bytes
) -> None:
    """A power cut before the roll's trim of a preallocated segment was durable leaves its
    zero-filled tail: recovery cuts those bytes and keeps every later segment, whose records
    may have been acknowledged (a hole would drop them, as in the next test)."""
    values = write_log(partition_dir)
    files = log_files(partition_dir)
    victim = files[1]
    size = victim.stat().st_size
    with open(victim, "ab") as file:
        file.write(residue)
    log = reopen(partition_dir, recovery_point=0)
    assert victim.stat().st_size == size
    assert [p.name for p in log_files(partition_dir)] == [f.name for f in files]
    assert [r.value for r in read_all(log)] == values
    assert log.log_end_offset == len(values)
    assert log.load_summary.truncated_bytes == len(residue)
    log.close()


def test_an_unclean_start_keeps_the_recovery_point_below_what_recovery_cut_until_a_flush(
    partition_dir: Path,
) -> None:
    """Recovery's cut of a preallocated tail is a change of size no fsync covered yet: a second
    power cut brings the zeros back. The recovery point the restarted log checkpoints must
    still lie below that segment, so the next start recovers it again instead of serving the
    zeros as records (a power-cut test caught a segment below the checkpoint served so)."""
    values = write_log(partition_dir)
    files = log_files(partition_dir)
    victim = files[1]
    size = victim.stat().st_size
    residue = bytes(4096 - size)  # the zero-filled rest of a preallocated segment
    with open(victim, "ab") as file:
        file.write(residue)
    log = reopen(partition_dir, recovery_point=0)
    assert victim.stat().st_size == size
    checkpointed = log.recovery_point  # what the log manager's checkpoint would write now
    assert checkpointed <= segment_base(victim)
    log.close_handlers()  # the power goes before anything is flushed
    with open(victim, "ab") as file:
        file.write(residue)  # the cut undoes the unsynced truncation
    log = reopen(partition_dir, recovery_point=checkpointed)
    assert victim.stat().st_size == size
    assert [r.value for r in read_all(log)] == values
    log.flush()  # syncs the recovered segments: only now may the recovery point pass them
    assert log.recovery_point == log.log_end_offset == len(values)
    log.close()


def test_crc_flip_in_the_middle_truncates_there_and_drops_later_segments(
    partition_dir: Path,
) -> None:
    values = write_log(partition_dir)
    files = log_files(partition_dir)
    victim = files[1]
    data = bytearray(victim.read_bytes())
    # Flip a byte inside the second batch's records (covered by its CRC).
    first_size = struct.unpack_from(">i", data, 8)[0] + 12
    data[first_size + 70] ^= 0xFF
    victim.write_bytes(bytes(data))
    log = reopen(partition_dir)  # recovery point 0: everything is scanned
    assert victim.stat().st_size == first_size
    assert [p.name for p in log_files(partition_dir)] == [f.name for f in files[:2]]
    records = read_all(log)
    assert [r.value for r in records] == values[: len(records)]
    assert log.log_end_offset == segment_base(victim) + 2
    log.close()


@pytest.mark.parametrize("index_damage", ["time index missing", "offset index odd size"])
@pytest.mark.parametrize("shutdown", ["unclean", "clean"])
def test_a_torn_segment_whose_index_is_rebuilt_drops_later_segments(
    partition_dir: Path, index_damage: str, shutdown: str
) -> None:
    """The index rebuild of step 3 recovers the segment too: when that cuts a torn batch,
    later segments go as in step 4, which then finds the segment whole."""
    values = write_log(partition_dir)
    files = log_files(partition_dir)
    victim = files[1]
    first_size = struct.unpack_from(">i", victim.read_bytes(), 8)[0] + 12
    os.truncate(victim, first_size + 10)  # its second batch torn
    base = segment_base(victim)
    dropped_bytes = 10 + sum(f.stat().st_size for f in files[2:])
    if index_damage == "time index missing":
        names.time_index_file(partition_dir, base).unlink()
    else:
        with open(names.offset_index_file(partition_dir, base), "ab") as index:
            index.write(b"\x00")
    log = reopen(partition_dir, recovery_point=0, had_clean_shutdown=shutdown == "clean")
    assert [p.name for p in log_files(partition_dir)] == [f.name for f in files[:2]]
    assert victim.stat().st_size == first_size
    records = read_all(log)
    assert [r.value for r in records] == values[: base + 2]
    assert log.log_end_offset == base + 2
    assert log.load_summary.truncated_bytes == dropped_bytes
    log.close()


def test_corruption_below_the_recovery_point_is_not_scanned(partition_dir: Path) -> None:
    values = write_log(partition_dir)
    files = log_files(partition_dir)
    data = bytearray(files[0].read_bytes())
    data[-5] ^= 0xFF
    files[0].write_bytes(bytes(data))
    log = reopen(partition_dir, recovery_point=segment_base(files[-1]))
    assert files[0].stat().st_size == len(data)  # not recovered: below the recovery point
    assert log.log_end_offset == len(values)
    log.close()


def test_clean_shutdown_skips_recovery(partition_dir: Path) -> None:
    write_log(partition_dir)
    reopen(partition_dir).close()  # a clean close trims the indexes
    last = log_files(partition_dir)[-1]
    size = last.stat().st_size
    with open(last, "ab") as file:
        file.write(b"\x00" * 100)
    log = reopen(partition_dir, had_clean_shutdown=True)
    assert log.segments.active_segment.size == size + 100  # garbage kept: nothing scanned
    log.close_handlers()
    log = reopen(partition_dir)
    assert log.segments.active_segment.size == size  # an unclean start scans and cuts it
    log.close()


def test_missing_index_is_rebuilt(partition_dir: Path) -> None:
    values = write_log(partition_dir)
    first = log_files(partition_dir)[0]
    index = names.offset_index_file(partition_dir, segment_base(first))
    time_index = names.time_index_file(partition_dir, segment_base(first))
    index.unlink()
    time_index.unlink()
    log = reopen(partition_dir, recovery_point=10**9, had_clean_shutdown=True)
    assert index.exists() and time_index.exists()
    assert [r.value for r in read_all(log, start=3)] == values[3:]
    assert log.segments.first_segment.offset_index.entries > 0
    log.close()


def test_an_empty_active_segment_without_index_files_opens_quietly(
    partition_dir: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A segment rolled but never written creates its index files on first use, so a clean
    shutdown can leave none: that is no damage to warn about."""
    values = write_log(partition_dir, batches=3)
    log = reopen(partition_dir)
    log.roll()
    log.flush()  # a clean shutdown flushes, then closes
    log.close()
    empty = log_files(partition_dir)[-1]
    assert empty.stat().st_size == 0
    assert not names.offset_index_file(partition_dir, segment_base(empty)).exists()
    caplog.clear()  # write_log stops as a crash would: the first reopen rebuilt its indexes
    with caplog.at_level("WARNING"):
        log = reopen(partition_dir, recovery_point=len(values), had_clean_shutdown=True)
        append(log, batch(values=[b"after"]))
    assert not caplog.records
    assert [r.value for r in read_all(log)] == [*values, b"after"]
    assert names.offset_index_file(partition_dir, segment_base(empty)).exists()
    log.close()


def test_a_crash_recovers_each_unflushed_segment_once_and_calls_no_index_corrupt(
    partition_dir: Path, caplog: pytest.LogCaptureFixture, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash leaves the active segment's indexes preallocated, zeros past their entries:
    the normal state of an unflushed segment, which recovery rebuilds anyway. Its sanity check
    would call them corrupt and rebuild them once more."""
    values = write_log(partition_dir)
    active = log_files(partition_dir)[-1]
    assert names.offset_index_file(partition_dir, segment_base(active)).stat().st_size == 4096
    recovered: list[int] = []
    real_recover = LogSegment.recover

    def counting_recover(segment: LogSegment) -> int:
        recovered.append(segment.base_offset)
        return real_recover(segment)

    monkeypatch.setattr(LogSegment, "recover", counting_recover)
    with caplog.at_level("WARNING"):
        log = reopen(partition_dir, recovery_point=segment_base(active))
    assert recovered == [segment_base(active)]
    assert not [r for r in caplog.records if "corrupt" in r.getMessage()]
    assert [r.value for r in read_all(log)] == values
    log.close()


@pytest.mark.parametrize(
    "damage",
    ["odd_size", "unsorted", "below_base"],
)
def test_corrupt_index_is_rebuilt(partition_dir: Path, damage: str) -> None:
    values = write_log(partition_dir)
    first = log_files(partition_dir)[0]
    index = names.offset_index_file(partition_dir, segment_base(first))
    log = reopen(partition_dir, had_clean_shutdown=True)  # trims the indexes on close
    log.close()
    data = bytearray(index.read_bytes())
    assert len(data) >= 16
    if damage == "odd_size":
        data += b"\x01\x02\x03"
    elif damage == "unsorted":
        data[0:8], data[8:16] = data[8:16], data[0:8]
    else:
        data[-8:-4] = struct.pack(">i", -5)
    index.write_bytes(bytes(data))
    log = reopen(partition_dir, had_clean_shutdown=True)
    assert [r.value for r in read_all(log)] == values
    log.segments.first_segment.offset_index.sanity_check()
    log.close()


def test_orphan_index_is_deleted(partition_dir: Path) -> None:
    write_log(partition_dir)
    orphan = names.offset_index_file(partition_dir, 99999)
    orphan_time = names.time_index_file(partition_dir, 99999)
    orphan.write_bytes(bytes(16))
    orphan_time.write_bytes(bytes(24))
    reopen(partition_dir).close()
    assert not orphan.exists() and not orphan_time.exists()


def segment_files(directory: Path, base: int, suffix: str = "") -> list[Path]:
    """The three files of the segment at ``base``, their names ending in ``suffix``."""
    return [
        name_of(directory, base, suffix)
        for name_of in (names.log_file, names.offset_index_file, names.time_index_file)
    ]


def rename_segment(directory: Path, base: int, old_suffix: str, new_suffix: str) -> None:
    new_files = segment_files(directory, base, new_suffix)
    for old, new in zip(segment_files(directory, base, old_suffix), new_files, strict=True):
        old.rename(new)


def cleaner_output(directory: Path, covered: list[Path], suffix: str) -> set[int]:
    """What the cleaner writes for the ``covered`` segments: one segment at the first one's base,
    its three files ending in ``suffix``, with their batches but the first of each (compacted
    away). Returns the offsets it dropped."""
    output = LogSegment.open(
        directory, segment_base(covered[0]), CONFIG, MockClock(), file_suffix=suffix
    )
    dropped: set[int] = set()
    for path in covered:
        first, *kept = MemoryRecords(path.read_bytes()).batches()
        dropped.update(range(first.base_offset, first.last_offset + 1))
        for kept_batch in kept:
            output.append(kept_batch.last_offset, kept_batch.to_bytes())
    output.close()
    return dropped


TEMPORARY_SUFFIXES = (names.DELETED_FILE_SUFFIX, names.CLEANED_FILE_SUFFIX, names.SWAP_FILE_SUFFIX)


@pytest.mark.parametrize(
    "leftovers",
    [
        "+".join(suffix.lstrip(".") for suffix in suffixes)
        for count in (1, 2, 3)
        for suffixes in itertools.combinations(TEMPORARY_SUFFIXES, count)
    ],
)
def test_temporary_files_left_by_a_crash(partition_dir: Path, leftovers: str) -> None:
    """design §8 step 1, in each combination. A crash cuts two cleanings, of segments 1-2 into one
    segment and of segments 3-4:
    - .cleaned: the second is half written;
    - .swap: the first is written and renamed .swap, not swapped in yet;
    - .deleted: the first is swapped in, its old files await their delayed delete; with .swap,
      the crash came amid the swap (UnifiedLog.replace_segments), after segment 1 was renamed
      .deleted.
    A .swap below every .cleaned is finished: it replaces the segments it covers."""
    values = write_log(partition_dir, batches=80)
    files = log_files(partition_dir)
    assert len(files) > 5
    bases = [segment_base(path) for path in files]
    swapped: set[int] = set()  # the offsets the swapped-in segment dropped
    if "swap" in leftovers or "deleted" in leftovers:
        swapped = cleaner_output(partition_dir, files[1:3], names.SWAP_FILE_SUFFIX)
    if "deleted" in leftovers:
        rename_segment(partition_dir, bases[1], "", names.DELETED_FILE_SUFFIX)
        if "swap" not in leftovers:
            rename_segment(partition_dir, bases[2], "", names.DELETED_FILE_SUFFIX)
            rename_segment(partition_dir, bases[1], names.SWAP_FILE_SUFFIX, "")
    if "cleaned" in leftovers:
        cleaner_output(partition_dir, files[3:5], names.CLEANED_FILE_SUFFIX)
        torn = names.log_file(partition_dir, bases[3], names.CLEANED_FILE_SUFFIX)
        os.truncate(torn, torn.stat().st_size // 2)
    found = {
        suffix.lstrip(".") for suffix in TEMPORARY_SUFFIXES if any(partition_dir.glob("*" + suffix))
    }
    assert found == set(leftovers.split("+"))  # the state is the one named

    log = reopen(partition_dir)
    kept_bases = [base for base in bases if not (swapped and base == bases[2])]
    assert [segment.base_offset for segment in log.segments.values()] == kept_bases
    assert sorted(
        path for path in partition_dir.iterdir() if path.name != "leader-epoch-checkpoint"
    ) == sorted(path for base in kept_bases for path in segment_files(partition_dir, base))
    records = read_all(log)
    assert [r.offset for r in records] == [o for o in range(len(values)) if o not in swapped]
    assert [r.value for r in records] == [v for o, v in enumerate(values) if o not in swapped]
    assert (log.log_start_offset, log.log_end_offset) == (0, len(values))
    log.close()


def test_swap_of_unfinished_operation_is_deleted(partition_dir: Path) -> None:
    """A .swap at or above a .cleaned is part of the same unfinished operation (Kafka renames a
    split's .cleaned files .swap from the last one): deleted, the old segments stay."""
    values = write_log(partition_dir)
    files = log_files(partition_dir)
    cleaner_output(partition_dir, files[:1], names.CLEANED_FILE_SUFFIX)
    cleaner_output(partition_dir, files[1:3], names.SWAP_FILE_SUFFIX)
    log = reopen(partition_dir)
    assert not [p for p in partition_dir.iterdir() if p.name.endswith(TEMPORARY_SUFFIXES)]
    assert [p.name for p in log_files(partition_dir)] == [f.name for f in files]
    assert [r.value for r in read_all(log)] == values
    log.close()


def test_index_swap_files_are_deleted_and_indexes_rebuilt(partition_dir: Path) -> None:
    values = write_log(partition_dir)
    first = log_files(partition_dir)[0]
    base = segment_base(first)
    index_swap = names.offset_index_file(partition_dir, base, names.SWAP_FILE_SUFFIX)
    index_swap.write_bytes(bytes(8))
    log = reopen(partition_dir)
    assert not index_swap.exists()
    assert names.offset_index_file(partition_dir, base).exists()
    assert [r.value for r in read_all(log)] == values
    log.close()


def test_log_end_below_log_start_offset_deletes_everything(partition_dir: Path) -> None:
    values = write_log(partition_dir)
    log = reopen(partition_dir, log_start_offset=len(values) + 50)
    assert log.log_start_offset == len(values) + 50
    assert log.log_end_offset == len(values) + 50
    assert log.number_of_segments == 1
    assert [segment_base(p) for p in log_files(partition_dir)] == [len(values) + 50]
    log.close()


def test_log_start_offset_is_at_least_the_first_segment_base(partition_dir: Path) -> None:
    write_log(partition_dir)
    files = log_files(partition_dir)
    for path in (
        files[0],
        names.offset_index_file(partition_dir, 0),
        names.time_index_file(partition_dir, 0),
    ):
        path.unlink()
    log = reopen(partition_dir, log_start_offset=0)
    assert log.log_start_offset == segment_base(files[1])
    log.close()


def test_empty_directory_gets_a_segment_at_the_log_start_offset(partition_dir: Path) -> None:
    partition_dir.mkdir()
    with open_log(partition_dir, CONFIG, log_start_offset=42) as log:
        assert log.log_end_offset == 42
        assert names.log_file(partition_dir, 42).exists()


def test_preallocated_index_left_by_a_crash_is_recovered(partition_dir: Path) -> None:
    values = write_log(partition_dir, batches=3)
    index = names.offset_index_file(partition_dir, 0)
    assert index.stat().st_size == CONFIG.segment_index_bytes // 8 * 8  # still preallocated
    log = reopen(partition_dir)
    assert [r.value for r in read_all(log)] == values
    append(log, batch(values=[b"after"]))
    assert read_all(log)[-1].value == b"after"
    log.close()


def test_recovered_segments_have_indexes_trimmed_and_the_active_one_grows_again(
    partition_dir: Path,
) -> None:
    values = write_log(partition_dir)
    log = reopen(partition_dir)  # a crash: every segment is recovered
    assert log.load_summary.recovered_segments == log.number_of_segments
    for segment in log.segments.non_active():
        for index in (segment.offset_index, segment.time_index):
            assert index.entries > 0
            assert index.path.stat().st_size == index.size_in_bytes  # as Kafka's recover leaves it
    for n in range(20):  # more index entries than the recovered active segment held
        append(log, batch(values=[b"more-%d" % n]))
    assert [r.value for r in read_all(log)] == values + [b"more-%d" % n for n in range(20)]
    log.close()
