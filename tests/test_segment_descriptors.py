"""Segment descriptors: only the active segment keeps its files open; every other segment's
descriptor and index map is opened on use and kept among a bounded number of idle files, and a
read holds the descriptor it reads from until it is done."""

from __future__ import annotations

import gc
import os
import threading
import time
import weakref
from collections.abc import Iterator
from pathlib import Path

import pytest
from log_helpers import append, batch, open_log, read_all, records_of
from log_manager_helpers import broker_config, running, topic_admin

from odradek.config.log_config import LogConfig
from odradek.storage import segment_append_state
from odradek.storage.abstract_index import AbstractIndex
from odradek.storage.fetch_data_info import FetchIsolation
from odradek.storage.file_records import FileRecords
from odradek.storage.idle_file_cache import IDLE_FILES, IdleFileCache
from odradek.storage.offset_index import OffsetIndex
from odradek.storage.scheduler import Scheduler
from odradek.storage.shared_descriptor import SharedDescriptor
from odradek.storage.unified_log import UnifiedLog
from odradek.topic_partition import TopicPartition

SMALL = LogConfig(
    segment_bytes=1024, index_interval_bytes=64, segment_index_bytes=4096, file_delete_delay_ms=0
)
CAPACITY = 4


@pytest.fixture(autouse=True)
def small_idle_cache() -> Iterator[None]:
    """A cache of CAPACITY holding none of the files earlier tests of the process left in
    it (released here, not inside the test, whose counts are of its own files)."""
    capacity = IDLE_FILES.capacity
    IDLE_FILES.touch(_OtherIdleFile())
    _evict_all_but_the_latest()
    try:
        yield
    finally:
        IDLE_FILES.set_capacity(capacity)


def descriptors_under(directory: Path) -> list[str]:
    """The targets of this process's open descriptors that lie under ``directory``."""
    targets = []
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith(str(directory)):
            targets.append(target)
    return targets


def settled_descriptors_under(
    directory: Path, bound: int, log: UnifiedLog | None = None
) -> list[str]:
    """``descriptors_under`` once at most ``bound`` (the flushes that follow each roll run on
    a scheduler thread and hold a descriptor while they run, as long as a busy disk makes
    their fsyncs last); fails naming the files still open after ``SETTLE_S``, which of them
    are index maps rather than plain descriptors (a flush's, a read's), and, given the
    ``log``, what each of its files holds and whether the idle file cache has it."""
    deadline = time.monotonic() + SETTLE_S
    while len(held := _collected_descriptors_under(directory)) > bound:
        if time.monotonic() > deadline:
            pytest.fail(
                f"{len(held)} descriptors open after {SETTLE_S} s, not {bound}: {held}; "
                f"mapped: {sorted(_mapped_files(directory))}"
                + ("" if log is None else f"; files: {_file_states(log)}")
            )
        time.sleep(0.05)
    return descriptors_under(directory)


def _file_states(log: UnifiedLog) -> list[str]:
    """What each file of ``log`` holds (an open descriptor, a map) and whether it is among
    the idle files the cache may release, with the number of files the cache holds."""
    states = [f"{len(IDLE_FILES)} cached of {IDLE_FILES.capacity}"]
    for segment in log.segments.values():
        files = [(segment.log, segment.log.is_open)]
        files += [(index, index.is_mapped) for index in (segment.offset_index, segment.time_index)]
        for file, holding in files:
            if holding or file in IDLE_FILES:
                cached = "cached" if file in IDLE_FILES else "NOT cached"
                states.append(f"{file.path.name} {'open' if holding else 'closed'}, {cached}")
    return states


def _mapped_files(directory: Path) -> set[str]:
    """The files under ``directory`` this process has mapped."""
    with open("/proc/self/maps") as maps:
        fields = (line.split(maxsplit=5) for line in maps)
        return {f[5].rstrip() for f in fields if len(f) == 6 and f[5].startswith(str(directory))}


SETTLE_S = 30.0


def _collected_descriptors_under(directory: Path) -> list[str]:
    """After a full collection: a read's descriptor pin caught in a reference cycle (a
    traceback, say) is let go when the cycle is collected, which a quiet test may not reach
    by allocating within its wait."""
    gc.collect()
    return descriptors_under(directory)


def fill(log, segments: int) -> None:
    while log.number_of_segments < segments:
        append(log, batch(5, value_size=40))


def test_a_partition_holds_its_active_segment_open_and_a_bounded_number_of_others(
    tmp_path: Path,
) -> None:
    scheduler = Scheduler()
    with open_log(tmp_path / "orders-0", SMALL, scheduler=scheduler) as log:
        fill(log, 40)
        assert log.number_of_segments == 40
        records = read_all(log)  # every segment read once: opened, and mostly closed again
        assert len(records) == log.log_end_offset
        # The active .log, and at most CAPACITY idle descriptors or index maps, once the
        # flushes the rolls scheduled are done (each holds one more while it syncs a file).
        scheduler.shutdown(run_pending_one_offs=True)
        open_now = settled_descriptors_under(tmp_path, 1 + CAPACITY)
        active = str(log.active_segment.log.path)
        assert active in open_now


def test_many_partitions_with_many_segments_stay_within_one_descriptor_per_partition(
    tmp_path: Path,
) -> None:
    config = broker_config(tmp_path, dirs=1, log_segment_bytes=1024, log_index_size_max_bytes=4096)
    with running(config) as manager:
        topic_admin(manager).create_topic("orders", 20)
        logs = [manager.get_log(TopicPartition("orders", p)) for p in range(20)]
        for log in logs:
            fill(log, 8)
            read_all(log)
        segments = sum(log.number_of_segments for log in logs)
        assert segments == 160
        settled_descriptors_under(tmp_path, len(logs) + CAPACITY + 1)  # + the directory lock
    with running(config) as manager:
        logs = [manager.get_log(TopicPartition("orders", p)) for p in range(20)]
        for log in logs:
            assert len(read_all(log)) == log.log_end_offset
        settled_descriptors_under(tmp_path, CAPACITY + 1)  # nothing written since the start


def test_an_inactive_segment_is_read_again_after_its_descriptor_was_closed(
    tmp_path: Path,
) -> None:
    scheduler = Scheduler()
    with open_log(tmp_path / "orders-0", SMALL, scheduler=scheduler) as log:
        fill(log, 3)
        # The flushes the rolls scheduled read the rolled segments' files too: done first,
        # they cannot put the first file back in the cache, or push it out, in between.
        scheduler.shutdown(run_pending_one_offs=True)
        first = log.segments.values()[0]
        expected = [r.value for r in records_of(log.read(0, 1 << 20, FetchIsolation.LOG_END))]
        IDLE_FILES.set_capacity(1)
        log.segments.values()[1].log.read(0, 1)  # the other idle file pushes it out
        assert not first.log.is_open
        again = [r.value for r in records_of(log.read(0, 1 << 20, FetchIsolation.LOG_END))]
        assert again == expected
        assert first.log.is_open


def test_a_slice_keeps_reading_its_segment_after_the_segment_is_closed_and_deleted(
    tmp_path: Path,
) -> None:
    with open_log(tmp_path / "orders-0", SMALL) as log:
        fill(log, 3)
        first = log.segments.values()[0]
        path = first.log.path
        info = log.read(0, 1 << 20, FetchIsolation.LOG_END)
        expected = info.records.read_bytes()
        fd = info.records.fd

        first.close_handlers()  # the segment lets go of its descriptor (deleted, shut down)
        os.unlink(path)
        reused = [os.open(tmp_path / f"other-{n}", os.O_RDWR | os.O_CREAT) for n in range(8)]
        try:
            for other in reused:
                os.write(other, b"x" * 1024)
            assert fd not in reused, "the number was reused while a slice held it"
            assert info.records.fd == fd
            assert os.readlink(f"/proc/self/fd/{fd}") == f"{path} (deleted)"
            assert info.records.read_bytes() == expected

            del info  # the last holder: now the descriptor closes
            assert f"{path} (deleted)" not in descriptors_under(tmp_path)
        finally:
            for other in reused:
                os.close(other)


def test_reads_racing_evictions_and_closes_always_read_their_own_segment(tmp_path: Path) -> None:
    IDLE_FILES.set_capacity(1)
    scheduler = Scheduler()
    with open_log(tmp_path / "orders-0", SMALL, scheduler=scheduler) as log:
        fill(log, 12)
        segments = log.segments.values()[:-1]
        expected = {s.base_offset: s.log.read(0, s.size) for s in segments}
        stop = threading.Event()
        failures: list[str] = []

        def read_slices(worker: int) -> None:
            n = worker
            while not stop.is_set():
                segment = segments[n % len(segments)]
                n += 7
                info = segment.read(segment.base_offset, 1 << 20)
                data = info.records.read_bytes()
                if data != expected[segment.base_offset]:
                    failures.append(f"segment {segment.base_offset} read other bytes")

        def churn() -> None:
            scratch = tmp_path / "scratch"
            while not stop.is_set():
                fd = os.open(scratch, os.O_RDWR | os.O_CREAT)
                os.close(fd)
                for segment in segments:
                    segment.log.release_idle()

        threads = [threading.Thread(target=read_slices, args=(w,)) for w in range(3)]
        threads.append(threading.Thread(target=churn))
        for thread in threads:
            thread.start()
        threading.Event().wait(1.0)
        stop.set()
        for thread in threads:
            thread.join()
        assert failures == []
        # The flushes the eleven rolls scheduled raced the reads too; each holds a descriptor
        # of its own while it syncs a file (an index's, the directory's), which a busy disk
        # can stretch past any wait (see the next test). Counted once they are done, the
        # count holds only what the reads and evictions left open.
        scheduler.shutdown(run_pending_one_offs=True)
        settled_descriptors_under(tmp_path / "orders-0", 1 + 1, log)  # the active .log, one idle


def test_a_roll_flush_holds_a_descriptor_of_its_own_only_while_it_syncs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A state the racing-reads test meets on a busy disk, made on purpose: the first roll's
    flush held inside its fsync of segment 0's offset index while the reads leave one idle
    file open. That is three descriptors with a capacity of 1, for as long as the fsync
    lasts, and no leak: once the flush is done, the count is back to the active .log and
    one idle file."""
    IDLE_FILES.set_capacity(1)
    first_index = tmp_path / "orders-0" / "00000000000000000000.index"
    syncing, may_sync = threading.Event(), threading.Event()
    fsync = os.fsync

    def fsync_held_at_the_first_index(fd: int) -> None:
        if not syncing.is_set() and os.readlink(f"/proc/self/fd/{fd}") == str(first_index):
            syncing.set()
            may_sync.wait(60)  # a bound only should the test fail before setting it
        fsync(fd)

    monkeypatch.setattr(os, "fsync", fsync_held_at_the_first_index)
    scheduler = Scheduler()
    with open_log(tmp_path / "orders-0", SMALL, scheduler=scheduler) as log:
        fill(log, 12)
        assert syncing.wait(60)
        segments = log.segments.values()
        for segment in segments[:-1]:
            segment.read(segment.base_offset, 1 << 20).records.read_bytes()
        gc.collect()
        last_read, active = segments[-2].log.path, segments[-1].log.path
        assert sorted(_collected_descriptors_under(tmp_path)) == sorted(
            map(str, [first_index, last_read, active])
        )
        assert str(first_index) not in _mapped_files(tmp_path)  # the flush's own descriptor

        may_sync.set()
        scheduler.shutdown(run_pending_one_offs=True)
        assert sorted(settled_descriptors_under(tmp_path, 1 + 1)) == sorted(
            map(str, [last_read, active])
        )


class _OtherIdleFile:
    """An idle file that holds nothing: touching it pushes the others out of the cache."""

    def release_idle(self) -> None:
        pass


def _evict_all_but_the_latest() -> None:
    IDLE_FILES.set_capacity(1)
    IDLE_FILES.set_capacity(CAPACITY)


class _ReleaseGate:
    """An idle file whose release waits for the test: the releases after it, of the files
    evicted along with it, wait too, so the test acts between their eviction (out of the
    cache, under its lock) and their release (after it)."""

    def __init__(self) -> None:
        self.releasing = threading.Event()
        self.may_release = threading.Event()

    def release_idle(self) -> None:
        self.releasing.set()
        self.may_release.wait(60)  # a bound only should the test fail before setting it


@pytest.mark.parametrize("file", ["log", "offset index"])
@pytest.mark.parametrize("state", ["open", "released"])
def test_a_file_read_while_the_cache_evicts_it_is_left_open_only_under_the_cache(
    tmp_path: Path, file: str, state: str
) -> None:
    """A read between a file's eviction and its release takes the descriptor or map the
    file still has (``open``), or opens it again (``released``: let go meanwhile, as the
    racing-reads test's churn does), and puts the file back in the cache; the release then
    lets go of it. Either way nothing stays open outside the cache: the read's bytes are the
    segment's, the file is in the cache, and the next read opens it under the cache."""
    scheduler = Scheduler()
    with open_log(tmp_path / "orders-0", SMALL, scheduler=scheduler) as log:
        fill(log, 3)
        scheduler.shutdown(run_pending_one_offs=True)  # no flush touches the cache meanwhile
        segment, active = log.segments.values()[0], log.segments.values()[-1]
        expected = segment.log.read(0, segment.size)
        idle: FileRecords | AbstractIndex
        if file == "log":
            idle = segment.log

            def read() -> None:
                assert segment.log.read(0, segment.size) == expected

        else:
            idle = segment.offset_index
            position = segment.offset_index.lookup(segment.base_offset + 5).position

            def read() -> None:
                assert segment.offset_index.lookup(segment.base_offset + 5).position == position

        gate = _ReleaseGate()
        IDLE_FILES.set_capacity(1)
        IDLE_FILES.touch(gate)  # the oldest, alone
        IDLE_FILES.set_capacity(3)
        read()
        if state == "released":
            idle.release_idle()  # still in the cache, open no more
        IDLE_FILES.touch(_OtherIdleFile())  # the cache: the gate, the file, another
        evicting = threading.Thread(target=IDLE_FILES.set_capacity, args=(1,))
        evicting.start()  # evicts the gate and the file; the gate's release waits
        assert gate.releasing.wait(60)
        assert idle not in IDLE_FILES  # evicted, not yet released
        read()
        assert idle in IDLE_FILES
        gate.may_release.set()
        evicting.join()  # the file's release: what the read held or opened goes

        gc.collect()
        assert descriptors_under(tmp_path) == [str(active.log.path)]
        read()
        assert idle in IDLE_FILES and len(IDLE_FILES) == 1
        assert sorted(descriptors_under(tmp_path)) == sorted(map(str, [idle.path, active.log.path]))


@pytest.mark.parametrize("evictions", ["once", "at every mapping"])
@pytest.mark.parametrize("state_type", ["c", "python"])
def test_an_index_evicted_while_the_append_state_maps_it_keeps_no_map(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, state_type: str, evictions: str
) -> None:
    """The active segment's append state maps both indexes again (a callback running Python)
    when an entry is due after an eviction. Should the cache evict the offset index between
    its mapping and the time index's, the state must not keep a view on the map the index
    just let go: nothing would give it back (the index is out of the cache) until the segment
    rolls. It maps the index again instead, which puts it back under the cache; evicted at
    every mapping, it writes the entry through the last map and lets go of it at once."""
    if state_type == "python":
        monkeypatch.setattr(
            segment_append_state,
            "SegmentAppendState",
            segment_append_state.PythonSegmentAppendState,
        )
    with open_log(tmp_path / "orders-0", SMALL) as log:
        log.append(batch(2, value_size=20))
        log.append(batch(2, value_size=20))  # an index entry: the state holds both maps
        segment = log.active_segment
        offset_index, time_index = segment.offset_index, segment.time_index
        other = _OtherIdleFile()
        IDLE_FILES.touch(other)
        _evict_all_but_the_latest()  # both indexes let go of their maps, the state its views

        offset_maps: list[weakref.ref] = []
        map_offset_index, map_time_index = offset_index.writable_map, time_index.writable_map

        def offset_map():
            index_map = map_offset_index()
            offset_maps.append(weakref.ref(index_map))
            return index_map

        def time_map_evicting_the_offset_index():
            index_map = map_time_index()  # now the latest in the cache
            if evictions != "once" or len(offset_maps) == 1:
                _evict_all_but_the_latest()
                assert offset_index not in IDLE_FILES
            return index_map

        monkeypatch.setattr(offset_index, "writable_map", offset_map)
        monkeypatch.setattr(time_index, "writable_map", time_map_evicting_the_offset_index)
        entries = offset_index.entries
        log.append(batch(2, value_size=20))  # an entry is due: the state maps both again
        assert offset_index.entries == entries + 1
        gc.collect()
        assert offset_maps[0]() is None, "a view on the evicted map outlived the eviction"
        if evictions == "once":
            assert offset_index in IDLE_FILES  # its map now is the cache's to release
        else:
            assert len(offset_maps) == segment_append_state.MAP_ATTEMPTS
            assert [ref() for ref in offset_maps] == [None] * len(offset_maps)

        IDLE_FILES.touch(other)
        _evict_all_but_the_latest()
        gc.collect()
        assert [ref() for ref in offset_maps] == [None] * len(offset_maps)
        monkeypatch.setattr(offset_index, "writable_map", map_offset_index)
        monkeypatch.setattr(time_index, "writable_map", map_time_index)
        log.append(batch(2, value_size=20))  # mapped again on the next entry
        assert offset_index.entries == entries + 2
        assert log.number_of_segments == 1
        assert len(read_all(log, upper="end")) == log.log_end_offset


def test_a_shared_descriptor_closes_with_its_last_holder(tmp_path: Path) -> None:
    fd = os.open(tmp_path / "file", os.O_RDWR | os.O_CREAT)
    descriptor = SharedDescriptor(fd)  # held by its opener
    assert descriptor.acquire()  # and a reader
    descriptor.release()  # the opener lets go: the reader still reads
    os.fstat(fd)
    assert descriptor.fd == fd and descriptor.holders == 1
    descriptor.release()
    assert descriptor.fd == -1 and not descriptor.acquire()
    with pytest.raises(OSError):
        os.fstat(fd)


def test_the_idle_file_cache_releases_the_least_recently_used() -> None:
    released: list[str] = []

    class File:
        def __init__(self, name: str) -> None:
            self.name = name

        def release_idle(self) -> None:
            released.append(self.name)

    cache = IdleFileCache(2)
    a, b, c = File("a"), File("b"), File("c")
    cache.touch(a)
    cache.touch(b)
    cache.touch(a)
    cache.touch(c)
    assert released == ["b"]
    cache.discard(a)
    cache.set_capacity(1)
    assert released == ["b"] and len(cache) == 1 and c in cache


def test_the_idle_file_cache_stays_bounded_under_touches_from_many_threads() -> None:
    class File:
        def __init__(self) -> None:
            self.releases = 0

        def release_idle(self) -> None:
            self.releases += 1

    cache = IdleFileCache(3)
    files = [File() for _ in range(12)]
    stop = threading.Event()

    def touch(worker: int) -> None:
        n = worker
        while not stop.is_set():
            cache.touch(files[n % len(files)])
            n += worker + 1
            if n % 97 == 0:
                cache.discard(files[n % len(files)])

    threads = [threading.Thread(target=touch, args=(w,)) for w in range(4)]
    for thread in threads:
        thread.start()
    threading.Event().wait(0.5)
    stop.set()
    for thread in threads:
        thread.join()
    assert len(cache) <= 3
    assert sum(file.releases for file in files) > 0  # files were evicted meanwhile
    recent = files[0]
    cache.touch(recent)
    for other in files[1:3]:
        cache.touch(other)
    assert recent in cache  # touched third from last: still among the three kept


def test_a_failed_close_logged_during_an_eviction_keeps_nothing_the_evicting_caller_held(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """An idle file is released inside whichever use evicts it: here the creation of an
    index, holding its new map. When that release's close fails (a file of a FUSE mount
    whose connection ended gives ENOTCONN; a number already closed, EBADF), the warning's
    record outlives the call (a log capture keeps it; so does any buffering handler). It must
    not keep the caller's map: evicted in turn, the index's file is mapped no more."""
    IDLE_FILES.set_capacity(1)
    unclosable = FileRecords(tmp_path / "gone.log", SharedDescriptor(1 << 30), 0, writing=False)
    IDLE_FILES.touch(unclosable)
    path = tmp_path / "00000000000000000000.index"
    index = OffsetIndex(path, 0, 4096)  # maps its file, which evicts and releases the other
    assert f"closing descriptor {1 << 30} reported" in caplog.text
    assert str(path) in _mapped_files(tmp_path)
    IDLE_FILES.touch(_OtherIdleFile())  # evicts the index
    gc.collect()
    assert not index.is_mapped
    assert str(path) not in _mapped_files(tmp_path), "a log record kept the evicted map"
