"""UnifiedLog.replace_segments: the live half of the cleaner's crash-safe swap (design §11)."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from log_helpers import append, batch, open_log, read_all

from odradek.clock import MockClock
from odradek.config.log_config import LogConfig
from odradek.storage import local_log
from odradek.storage import log_file_names as names
from odradek.storage.log_segment import LogSegment
from odradek.storage.unified_log import UnifiedLog

CONFIG = LogConfig(
    segment_bytes=300,
    index_interval_bytes=64,
    segment_index_bytes=4096,
    cleanup_policy=("compact",),
)


def _fill(log: UnifiedLog, keys: list[bytes]) -> None:
    for key in keys:
        append(log, batch(1, key=key, values=[key + b"-value"]))


def _swap_segment_keeping(log: UnifiedLog, old: list[LogSegment], keep: set[int]) -> LogSegment:
    """A ``.swap`` segment holding the batches of ``old`` whose base offset is in ``keep``."""
    swap = LogSegment.open(
        log.dir, old[0].base_offset, log.config, MockClock(), file_suffix=names.SWAP_FILE_SUFFIX
    )
    for segment in old:
        for _, stored in segment.log.batches():
            if stored.base_offset in keep:
                swap.append(stored.last_offset, stored.to_bytes())
    swap.on_become_inactive_segment()
    swap.flush()
    return swap


def test_replace_segments_swaps_the_files_and_the_map(tmp_path: Path) -> None:
    with open_log(tmp_path / "t-0", CONFIG) as log:
        _fill(log, [b"a", b"b", b"a", b"c", b"b", b"d", b"a", b"e"])
        old = log.segments.non_active()
        assert len(old) >= 2
        swap = _swap_segment_keeping(log, old, keep={3, 4})
        log.replace_segments(swap, old)

        assert log.segments.get(old[0].base_offset) is swap
        assert all(not log.segments.contains(s.base_offset) for s in old[1:])
        assert swap.log.path == names.log_file(log.dir, old[0].base_offset)
        assert not any(p.name.endswith(names.SWAP_FILE_SUFFIX) for p in log.dir.iterdir())
        deleted = sorted(p.name for p in log.dir.iterdir() if p.name.endswith(".log.deleted"))
        assert deleted == [names.log_file(log.dir, s.base_offset).name + ".deleted" for s in old]
        first_kept = old[-1].read_next_offset()
        assert [r.offset for r in read_all(log)] == [3, 4, *range(first_kept, log.log_end_offset)]


def test_replace_segments_leaves_segments_already_deleted_alone(tmp_path: Path) -> None:
    with open_log(tmp_path / "t-0", CONFIG) as log:
        _fill(log, [b"a", b"b", b"c", b"d", b"e", b"f", b"g"])
        old = log.segments.non_active()
        swap = _swap_segment_keeping(log, old, keep=set(range(100)))
        gone = old[-1]
        log.segments.remove(gone.base_offset)
        log.replace_segments(swap, old)
        assert gone.log.path == names.log_file(log.dir, gone.base_offset)
        assert gone.log.path.exists()


def test_the_swap_is_made_durable_step_by_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with open_log(tmp_path / "t-0", CONFIG) as log:
        _fill(log, [b"a", b"b", b"a", b"c", b"b", b"d", b"a", b"e"])
        old = log.segments.non_active()
        swap = _swap_segment_keeping(log, old, keep={3, 4})
        swap_file = swap.log.path
        final_file = names.log_file(log.dir, old[0].base_offset)
        synced: list[tuple[bool, bool]] = []  # (old segments .deleted, .swap renamed) per fsync
        swapping = threading.get_ident()

        def fsync_directory(directory: Path) -> None:
            if threading.get_ident() != swapping:
                return  # a flush a roll scheduled, syncing the new segments' names
            deleted = all(not names.log_file(directory, s.base_offset).exists() for s in old[1:])
            synced.append((deleted, final_file.exists() and not swap_file.exists()))

        monkeypatch.setattr(local_log, "fsync_directory", fsync_directory)
        log.replace_segments(swap, old)
        # The old segments' .deleted renames are durable before the .swap suffix goes, and
        # that rename before replace_segments returns (before the next run's .cleaned files).
        assert synced == [(True, False), (True, True)]
