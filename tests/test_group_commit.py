"""GroupCommit: a failed flush fails every waiter, and a waiter nobody awaits any more (its
producer went away, or its request timed out) leaves no "Future exception was never
retrieved" behind."""

from __future__ import annotations

import asyncio
import gc

from odradek.errors import KafkaStorageError
from odradek.server.group_commit import GroupCommit
from odradek.server.log_flusher import LogFlusher
from odradek.storage.log_offset_metadata import LogOffsetMetadata


class FailingFlushLog:
    """The two things GroupCommit reads of a UnifiedLog, and a flush whose disk fails."""

    recovery_point = 0
    topic_partition = "failing-0"
    log_end_offset_metadata = LogOffsetMetadata(10)

    def flush(self, offset: int) -> None:
        raise KafkaStorageError(f"flush to {offset} failed: the disk is gone")


def test_a_failed_flush_fails_its_waiters_and_leaves_none_unread() -> None:
    async def scenario() -> tuple[BaseException | None, list[dict]]:
        loop = asyncio.get_running_loop()
        unread: list[dict] = []
        loop.set_exception_handler(lambda _loop, context: unread.append(context))
        flusher = LogFlusher(1)
        try:
            commit = GroupCommit(FailingFlushLog(), flusher, lambda _end: None)
            awaited = commit.durable(5)
            abandoned = commit.durable(7)  # its producer's connection closed meanwhile
            try:
                await awaited
            except KafkaStorageError as error:
                raised: BaseException | None = error
            else:
                raised = None
            assert abandoned.done()
            del abandoned
            gc.collect()
            await asyncio.sleep(0)
        finally:
            flusher.shutdown()
        return raised, unread

    raised, unread = asyncio.run(scenario())
    assert isinstance(raised, KafkaStorageError)
    assert unread == []
