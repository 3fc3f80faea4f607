"""Partition: the leader's side of one partition (Kafka's ``Partition``) over its UnifiedLog."""

from __future__ import annotations

import asyncio
import struct
from collections.abc import Callable
from concurrent.futures import Executor
from functools import partial

from odradek.errors import KafkaError
from odradek.protocol.values.produce import Acks
from odradek.record.record_batch import (
    ATTRIBUTES_OFFSET,
    BATCH_LENGTH_OFFSET,
    COMPRESSION_CODEC_MASK,
    LOG_OVERHEAD,
    RECORDS_OFFSET,
    decompresses_within,
)
from odradek.server.group_commit import Durable, GroupCommit
from odradek.server.log_flusher import LogFlusher
from odradek.storage.fetch_data_info import FetchIsolation
from odradek.storage.log_append_info import LogAppendInfo
from odradek.storage.log_offset_metadata import LogOffsetMetadata
from odradek.storage.unified_log import UnifiedLog
from odradek.topic_partition import TopicPartition

OffsetsMoved = Callable[[TopicPartition], None]

# (Members at hand: looking one up on its enum class costs about a call, per request.)
_ACKS_ALL = Acks.ALL


INLINE_APPEND_MAX_BYTES = 64 * 1024
"""Appends up to this size run on the event loop (cheaper than a hop to a thread); larger
ones, whose write to the page cache takes milliseconds, run on the append threads."""
INLINE_DECOMPRESSED_MAX_BYTES = 128 * 1024
"""So do appends whose compressed batches expand past this: validating them may mean
decompressing up to max.message.bytes x message.decompression.max.ratio, tens of
milliseconds. Found by decompressing no further than this, a fraction of a millisecond."""


_BATCH_LENGTH = struct.Struct(">i")


def _runs_inline(records: bytes | memoryview) -> bool:
    size = len(records)
    if size > INLINE_APPEND_MAX_BYTES:
        return False
    if (
        size > RECORDS_OFFSET
        and not records[ATTRIBUTES_OFFSET + 1] & COMPRESSION_CODEC_MASK
        and _BATCH_LENGTH.unpack_from(records, BATCH_LENGTH_OFFSET)[0] == size - LOG_OVERHEAD
    ):
        return True  # one uncompressed batch (what a producer sends a partition): no expansion
    return decompresses_within(records, INLINE_DECOMPRESSED_MAX_BYTES)


class Partition:
    """Appends to one UnifiedLog and moves its high watermark as a single replica must (§7, 9).

    The broker is the partition's only replica, so the HW follows the log end: at once after
    an acks=0/1 append, and after an acks=all append once it is fsync'ed (HW := max(HW,
    flushed offset)). ``on_offsets_moved`` is told whenever the log end or the HW moves, so
    waiting fetches can look again.
    """

    def __init__(
        self,
        log: UnifiedLog,
        append_executor: Executor,
        flusher: LogFlusher,
        on_offsets_moved: OffsetsMoved,
    ) -> None:
        self.log = log
        self.topic_partition = log.topic_partition
        self._append_executor = append_executor
        self._on_offsets_moved = on_offsets_moved
        self._group_commit = GroupCommit(log, flusher, self._flushed)
        self._flushed_end: LogOffsetMetadata | None = None
        self._last_append: asyncio.Future[LogAppendInfo] | None = None

    def __repr__(self) -> str:
        return f"Partition({self.topic_partition})"

    def append_now(self, records: bytes | memoryview, acks: Acks) -> LogAppendInfo | None:
        """Append ``records`` here and now when that is cheap and keeps the order: none is
        queued ahead and they are small (see ``_runs_inline``). None when they must queue:
        call ``append`` then. Raises the UnifiedLog's Kafka error when they are refused (nothing of
        them is written then)."""
        if self._last_append is not None or not _runs_inline(records):
            return None
        info = self.log.append(records, commit=acks is not _ACKS_ALL)  # as _append_now
        self._on_offsets_moved(self.topic_partition)
        return info

    def append(self, records: bytes | memoryview, acks: Acks) -> asyncio.Future[LogAppendInfo]:
        """Append ``records`` after every append started before; the future fails with the
        UnifiedLog's Kafka error when they are refused (nothing of them is written then).

        A small append with none queued ahead is done before this returns (``append_now``);
        the others queue behind the last one and run in turn, large ones (or ones that
        decompress to much) on an append thread. A queued append runs to its end even if its
        caller is cancelled (the connection went away), so the high watermark still follows it
        and the appends behind it keep their order.
        """
        loop = asyncio.get_running_loop()
        if self._last_append is None and _runs_inline(records):
            done = loop.create_future()
            try:
                done.set_result(self._append_now(records, acks))
            except KafkaError as error:
                done.set_exception(error)
            return done
        queued = loop.create_task(self._append_after(self._last_append, records, acks))
        self._last_append = queued
        queued.add_done_callback(self._forget_last_append)
        return asyncio.shield(queued)

    async def _append_after(
        self,
        previous: asyncio.Future[LogAppendInfo] | None,
        records: bytes | memoryview,
        acks: Acks,
    ) -> LogAppendInfo:
        if previous is not None:
            await asyncio.wait([previous])
        if _runs_inline(records):
            return self._append_now(records, acks)
        loop = asyncio.get_running_loop()
        append = partial(self.log.append, records, commit=acks is not Acks.ALL)
        info = await loop.run_in_executor(self._append_executor, append)
        self._on_offsets_moved(self.topic_partition)
        return info

    def _forget_last_append(self, append: asyncio.Task[LogAppendInfo]) -> None:
        if self._last_append is append:
            self._last_append = None
        if not append.cancelled():
            append.exception()  # read here too: a cancelled caller leaves it unread

    def _append_now(self, records: bytes | memoryview, acks: Acks) -> LogAppendInfo:
        """The append, with the HW following the log end at acks 0 or 1 (the UnifiedLog moves it
        in the same step), and the waiting fetches told."""
        info = self.log.append(records, commit=acks is not Acks.ALL)
        self._on_offsets_moved(self.topic_partition)
        return info

    def append_end_txn_marker(
        self, producer_id: int, producer_epoch: int, coordinator_epoch: int, committed: bool
    ) -> asyncio.Future[LogAppendInfo]:
        """Append the transaction coordinator's COMMIT or ABORT marker after every append
        started before (UnifiedLog.append_end_txn_marker; a small append, made on the event
        loop); the high watermark moves once it is durable (``durable``), as for acks=all."""
        loop = asyncio.get_running_loop()
        append = partial(
            self.log.append_end_txn_marker,
            producer_id,
            producer_epoch,
            coordinator_epoch,
            committed,
        )
        if self._last_append is None:
            done = loop.create_future()
            try:
                done.set_result(append())
            except KafkaError as error:
                done.set_exception(error)
            self._on_offsets_moved(self.topic_partition)
            return done
        queued = loop.create_task(self._marker_after(self._last_append, append))
        self._last_append = queued
        queued.add_done_callback(self._forget_last_append)
        return asyncio.shield(queued)

    async def _marker_after(
        self, previous: asyncio.Future[LogAppendInfo], append: Callable[[], LogAppendInfo]
    ) -> LogAppendInfo:
        await asyncio.wait([previous])
        info = append()
        self._on_offsets_moved(self.topic_partition)
        return info

    def durable(self, last_offset: int, at_once: bool = False) -> asyncio.Future[None]:
        """Done once ``last_offset`` is fsync'ed (shared with other waiters: group commit;
        ``at_once``: without lingering for more, see GroupCommit.durable)."""
        return self._group_commit.durable(last_offset, at_once)

    def when_durable(self, last_offset: int, durable: Durable) -> bool:
        """``durable`` called once ``last_offset`` is fsync'ed (or with the flush's error);
        True instead when it is already (see GroupCommit.when_durable)."""
        return self._group_commit.when_durable(last_offset, durable)

    def end_offset_metadata(self, isolation: FetchIsolation) -> LogOffsetMetadata:
        """Where a read with ``isolation`` stops now, with its position when it is known."""
        log = self.log
        log_end = log.log_end_offset_metadata
        if isolation is FetchIsolation.LOG_END:
            return log_end
        if isolation is FetchIsolation.TXN_COMMITTED:
            last_stable = log.last_stable_offset
            if last_stable != log.high_watermark:
                return LogOffsetMetadata(last_stable)
        high_watermark = log.high_watermark
        if high_watermark == log_end.message_offset:
            return log_end
        flushed = self._flushed_end
        if flushed is not None and flushed.message_offset == high_watermark:
            return flushed
        return LogOffsetMetadata(high_watermark)

    def _flushed(self, end: LogOffsetMetadata) -> None:
        if self.log.maybe_increment_high_watermark(end) is not None:
            self._flushed_end = end
            self._on_offsets_moved(self.topic_partition)
