"""LogCleanerManager: choosing the dirtiest log, its dirty section, and keeping the cleaner and
the rest of the broker off each other's logs (design §11)."""

from __future__ import annotations

import logging
import threading
import time
from contextlib import ExitStack
from pathlib import Path

import pytest
from cleaner_helpers import compact_config, write
from log_helpers import BASE_TIME_MS, open_log

from odradek.cleaner.cleaner_offset_checkpoints import (
    CLEANER_OFFSET_CHECKPOINT_FILE,
    CleanerOffsetCheckpoints,
)
from odradek.cleaner.log_cleaner_manager import ABORTED, IN_PROGRESS, LogCleanerManager, paused
from odradek.clock import MockClock
from odradek.config.log_config import LogConfig
from odradek.storage.offset_checkpoint_file import OffsetCheckpointFile
from odradek.storage.unified_log import UnifiedLog
from odradek.topic_partition import TopicPartition

NOW_MS = BASE_TIME_MS + 3_600_000


def _manager(logs: list[UnifiedLog], now_ms: int = NOW_MS, clock: MockClock | None = None):
    return LogCleanerManager(
        lambda: list(logs),
        CleanerOffsetCheckpoints(lambda: list(logs)),
        clock or MockClock(now_ms),
        retry_backoff_ms=1_000,
    )


def _dirty_log(stack: ExitStack, directory: Path, keys: int, rounds: int, **config) -> UnifiedLog:
    """A log whose first ``keys`` records are clean-looking and the rest updates."""
    log = stack.enter_context(open_log(directory, compact_config(**config)))
    write(log, [(b"k%d" % (n % keys), b"v" * 20) for n in range(keys * rounds)])
    log.roll()
    return log


def _checkpoint(root: Path) -> dict[TopicPartition, int]:
    return OffsetCheckpointFile(root / CLEANER_OFFSET_CHECKPOINT_FILE).read()


def test_picks_the_log_with_the_highest_dirty_ratio(tmp_path: Path) -> None:
    with ExitStack() as stack:
        a = _dirty_log(stack, tmp_path / "a-0", keys=10, rounds=4, min_cleanable_dirty_ratio=0.1)
        b = _dirty_log(stack, tmp_path / "b-0", keys=10, rounds=4)
        manager = _manager([a, b])
        # a's first half is clean: ratio about 0.5; b is all dirty: ratio 1.0
        middle = a.segments.non_active()[len(a.segments.non_active()) // 2].base_offset
        CleanerOffsetCheckpoints(lambda: [a, b]).update_cleaner_offsets({a.topic_partition: middle})

        first = manager.grab_filthiest_compacted_log()
        assert first is not None and first.log is b and first.cleanable_ratio == 1.0
        assert manager.dirtiest_log_cleanable_ratio == 1.0
        assert manager.cleaning_state(b.topic_partition) == IN_PROGRESS
        second = manager.grab_filthiest_compacted_log()  # b is taken: a is next
        assert second is not None and second.log is a
        assert second.first_dirty_offset == middle and 0.3 < second.cleanable_ratio < 0.7
        assert manager.grab_filthiest_compacted_log() is None


def test_logs_below_their_min_cleanable_ratio_or_not_compacted_are_left(tmp_path: Path) -> None:
    with ExitStack() as stack:
        below = _dirty_log(
            stack, tmp_path / "a-0", keys=10, rounds=4, min_cleanable_dirty_ratio=1.0
        )
        deleted = stack.enter_context(open_log(tmp_path / "b-0", LogConfig(segment_bytes=1024)))
        write(deleted, [(b"k", b"v")] * 40)
        deleted.roll()
        empty = stack.enter_context(open_log(tmp_path / "c-0", compact_config()))
        manager = _manager([below, deleted, empty])
        assert manager.grab_filthiest_compacted_log() is None
        assert manager.dirtiest_log_cleanable_ratio == 1.0  # measured, just not over its ratio


def test_max_compaction_lag_forces_cleaning_below_the_ratio(tmp_path: Path) -> None:
    with ExitStack() as stack:
        log = _dirty_log(
            stack,
            tmp_path / "a-0",
            keys=10,
            rounds=4,
            min_cleanable_dirty_ratio=1.0,
            max_compaction_lag_ms=60_000,
        )
        assert _manager([log], now_ms=BASE_TIME_MS + 60_000).grab_filthiest_compacted_log() is None
        manager = _manager([log], now_ms=BASE_TIME_MS + 90_000)
        cleanable = manager.grab_filthiest_compacted_log()
        assert cleanable is not None and cleanable.needs_compaction_now
        assert manager.max_compaction_delay_ms == 30_000


def test_first_dirty_offset_comes_from_the_checkpoint_clamped_to_the_log(tmp_path: Path) -> None:
    with ExitStack() as stack:
        log = _dirty_log(stack, tmp_path / "a-0", keys=10, rounds=6)
        tp = log.topic_partition
        checkpoints = CleanerOffsetCheckpoints(lambda: [log])
        segments = log.segments.non_active()
        log.delete_records(segments[1].base_offset)
        for checkpointed, expected in [
            (segments[2].base_offset, segments[2].base_offset),  # inside the log: used as is
            (0, segments[1].base_offset),  # below the log start offset
            (log.log_end_offset + 5, segments[1].base_offset),  # past the log end
        ]:
            checkpoints.update_cleaner_offsets({tp: checkpointed})
            manager = _manager([log])
            cleanable = manager.grab_filthiest_compacted_log()
            assert cleanable is not None and cleanable.first_dirty_offset == expected
            assert _checkpoint(tmp_path)[tp] == expected  # a reset is written back at once
            manager.done_cleaning(tp, None)


def test_done_cleaning_checkpoints_the_new_first_dirty_offset(tmp_path: Path) -> None:
    with ExitStack() as stack:
        log = _dirty_log(stack, tmp_path / "a-0", keys=10, rounds=4)
        manager = _manager([log])
        tp = log.topic_partition
        manager.grab_filthiest_compacted_log()
        manager.done_cleaning(tp, 17)
        assert _checkpoint(tmp_path) == {tp: 17}
        assert manager.cleaning_state(tp) is None
        assert manager.first_dirty_offset(tp) == 17


def test_abort_and_pause_waits_for_the_cleaner_to_let_go(tmp_path: Path) -> None:
    with ExitStack() as stack:
        log = _dirty_log(stack, tmp_path / "a-0", keys=10, rounds=4)
        manager = _manager([log])
        tp = log.topic_partition
        manager.grab_filthiest_compacted_log()
        paused_event = threading.Event()
        pauser = threading.Thread(
            target=lambda: (manager.abort_and_pause_cleaning(tp), paused_event.set())
        )
        pauser.start()
        deadline = time.monotonic() + 30  # the pauser has marked the run aborted: then it waits
        while not manager.is_cleaning_aborted(tp):
            assert time.monotonic() < deadline, "abort_and_pause_cleaning never aborted the run"
            time.sleep(0.01)
        assert not paused_event.wait(0.2)  # and keeps waiting while the cleaner holds the log
        assert manager.cleaning_state(tp) == ABORTED
        manager.done_cleaning(tp, 30)  # the aborted run must not move the checkpoint
        pauser.join(5)
        assert paused_event.is_set()
        assert manager.cleaning_state(tp) == paused(1)
        assert _checkpoint(tmp_path) == {}
        assert manager.grab_filthiest_compacted_log() is None  # paused logs are skipped
        manager.resume_cleaning([tp])
        assert manager.grab_filthiest_compacted_log() is not None


def test_pauses_nest_and_resume_needs_a_pause(tmp_path: Path) -> None:
    with ExitStack() as stack:
        log = _dirty_log(stack, tmp_path / "a-0", keys=10, rounds=4)
        manager = _manager([log])
        tp = log.topic_partition
        with pytest.raises(ValueError, match="not paused"):
            manager.resume_cleaning([tp])
        manager.abort_and_pause_cleaning(tp)
        manager.abort_and_pause_cleaning(tp)
        assert manager.cleaning_state(tp) == paused(2)
        manager.resume_cleaning([tp])
        assert manager.grab_filthiest_compacted_log() is None
        manager.resume_cleaning([tp])
        assert manager.cleaning_state(tp) is None
        manager.abort_cleaning(tp)  # abort of an idle log: nothing stays paused
        assert manager.cleaning_state(tp) is None


def test_retention_is_split_between_the_log_manager_and_the_cleaner(tmp_path: Path) -> None:
    with ExitStack() as stack:
        compacted = _dirty_log(stack, tmp_path / "a-0", keys=10, rounds=4)
        both = _dirty_log(
            stack, tmp_path / "b-0", keys=10, rounds=4, cleanup_policy=("compact", "delete")
        )
        deleted = stack.enter_context(open_log(tmp_path / "c-0", LogConfig()))
        manager = _manager([compacted, both, deleted])
        for_log_manager = manager.pause_cleaning_for_non_compacted_partitions()
        assert for_log_manager == [deleted]
        assert manager.cleaning_state(deleted.topic_partition) == paused(1)
        for_cleaner = manager.deletable_logs()
        assert for_cleaner == [compacted, both]
        assert manager.cleaning_state(compacted.topic_partition) == IN_PROGRESS
        assert manager.grab_filthiest_compacted_log() is None  # all three are held
        manager.done_deleting(log.topic_partition for log in for_cleaner)
        manager.resume_cleaning([deleted.topic_partition])
        assert manager.grab_filthiest_compacted_log() is not None


def test_uncleanable_partitions_are_skipped_until_forgotten(tmp_path: Path) -> None:
    with ExitStack() as stack:
        log = _dirty_log(stack, tmp_path / "a-0", keys=10, rounds=4)
        manager = _manager([log])
        manager.mark_partition_uncleanable(tmp_path, log.topic_partition, "broken\ndetails")
        assert manager.uncleanable_partitions() == {tmp_path: {log.topic_partition: "broken"}}
        assert manager.grab_filthiest_compacted_log() is None
        manager.handle_log_dir_failure(tmp_path)
        assert manager.grab_filthiest_compacted_log() is not None


def test_truncation_lowers_the_checkpoint(tmp_path: Path) -> None:
    with ExitStack() as stack:
        log = _dirty_log(stack, tmp_path / "a-0", keys=10, rounds=4)
        manager = _manager([log])
        tp = log.topic_partition
        CleanerOffsetCheckpoints(lambda: [log]).update_cleaner_offsets({tp: 30})
        manager.maybe_truncate_checkpoint(log, 40)
        assert _checkpoint(tmp_path) == {tp: 30}
        manager.maybe_truncate_checkpoint(log, 12)
        assert _checkpoint(tmp_path) == {tp: 12}


def test_checkpoint_updates_drop_partitions_that_are_gone(tmp_path: Path) -> None:
    with ExitStack() as stack:
        a = _dirty_log(stack, tmp_path / "a-0", keys=10, rounds=2)
        b = _dirty_log(stack, tmp_path / "b-0", keys=10, rounds=2)
        logs = [a, b]
        checkpoints = CleanerOffsetCheckpoints(lambda: list(logs))
        checkpoints.update_cleaner_offsets({a.topic_partition: 5, b.topic_partition: 6})
        logs.remove(b)  # b's topic was deleted
        checkpoints.update_cleaner_offsets({a.topic_partition: 7})
        assert _checkpoint(tmp_path) == {a.topic_partition: 7}


def test_a_failed_partition_is_retried_with_backoff_then_marked_uncleanable(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with ExitStack() as stack:
        log = _dirty_log(stack, tmp_path / "a-0", keys=10, rounds=4)
        tp = log.topic_partition
        clock = MockClock(NOW_MS)
        manager = _manager([log], clock=clock)
        for attempt, backoff_ms in ((1, 1_000), (2, 2_000)):
            assert manager.grab_filthiest_compacted_log() is not None
            manager.cleaning_failed(tmp_path, tp, f"worker died ({attempt})")
            manager.done_cleaning(tp, None)
            assert manager.failed_attempts(tp) == attempt
            clock.sleep(backoff_ms - 1)
            assert manager.grab_filthiest_compacted_log() is None  # still backing off
            clock.sleep(1)
        assert manager.grab_filthiest_compacted_log() is not None
        with caplog.at_level(logging.ERROR):
            manager.cleaning_failed(tmp_path, tp, "worker died (3)")
        manager.done_cleaning(tp, None)
        reason = manager.uncleanable_partitions()[tmp_path][tp]
        assert reason == "3 cleaning runs failed in a row; the last: worker died (3)"
        assert f"[{tp}] marked uncleanable" in caplog.text and "worker died (3)" in caplog.text
        clock.sleep(3_600_000)
        assert manager.grab_filthiest_compacted_log() is None


def test_a_completed_run_resets_the_failure_count(tmp_path: Path) -> None:
    with ExitStack() as stack:
        log = _dirty_log(stack, tmp_path / "a-0", keys=10, rounds=4)
        tp = log.topic_partition
        clock = MockClock(NOW_MS)
        manager = _manager([log], clock=clock)
        for _ in range(2):
            assert manager.grab_filthiest_compacted_log() is not None
            manager.cleaning_failed(tmp_path, tp, "worker died")
            manager.done_cleaning(tp, None)
            clock.sleep(10_000)
        assert manager.grab_filthiest_compacted_log() is not None
        manager.done_cleaning(tp, log.segments.non_active()[1].base_offset)
        assert manager.failed_attempts(tp) == 0
        assert manager.uncleanable_partitions() == {}
