"""GroupCommit: a failed flush fails every waiter, and a waiter nobody awaits any more (its
producer went away, or its request timed out) leaves no "Future exception was never
retrieved" behind; a producer's requests in flight share a flush once it lingers for them."""

from __future__ import annotations

import asyncio
import gc
import time

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


class SlowFlushLog:
    """A log whose flush takes ``flush_s`` (an fsync's time) and counts itself."""

    topic_partition = "slow-0"

    def __init__(self, flush_s: float) -> None:
        self.flush_s = flush_s
        self.recovery_point = 0
        self.high_watermark = 0
        self.end = 0
        self.flushes = 0

    @property
    def log_end_offset_metadata(self) -> LogOffsetMetadata:
        return LogOffsetMetadata(self.end)

    def flush(self, offset: int) -> None:
        time.sleep(self.flush_s)
        self.flushes += 1
        self.recovery_point = max(self.recovery_point, offset)


def fsyncs_per_request(linger_ms: int, requests: int = 200) -> tuple[float, list[str]]:
    """A producer keeping five requests in flight on one partition, sending the next one a
    client turn-around (0.2 ms) after each answer, against flushes of 3 ms: the flushes per
    request, and every request answered before its offset was flushed."""
    log = SlowFlushLog(0.003)
    early: list[str] = []

    async def scenario() -> None:
        flusher = LogFlusher(1, linger_ms)
        commit = GroupCommit(log, flusher, lambda _end: None)
        loop = asyncio.get_running_loop()
        done = loop.create_future()
        sent = 0

        def send() -> None:
            nonlocal sent
            if sent == requests:
                return
            offset = log.end
            log.end += 1
            sent += 1
            commit.durable(offset).add_done_callback(lambda _f, o=offset: answered(o))

        def answered(offset: int) -> None:
            if log.recovery_point <= offset:
                early.append(f"offset {offset} answered at recovery point {log.recovery_point}")
            if offset == requests - 1:
                done.set_result(None)
            loop.call_later(0.0002, send)

        try:
            for _ in range(5):
                send()
            await asyncio.wait_for(done, 60)
        finally:
            flusher.shutdown()

    asyncio.run(scenario())
    return log.flushes / requests, early


def test_a_linger_lets_a_producers_requests_in_flight_share_a_flush() -> None:
    """Without a linger the flushes fall into the rhythm of one for a lone request and one for
    the rest; lingering for the requests the last flush answered, they share one (ideally a
    fifth of a flush a request), and no request is answered before its flush."""
    lingering, early = fsyncs_per_request(linger_ms=50)
    assert early == []
    at_once, early = fsyncs_per_request(linger_ms=0)
    assert early == []
    assert lingering <= 0.3 < at_once, (lingering, at_once)


def time_to_durable(at_once: bool) -> float:
    """After a flush answered three requests (so the next one lingers for three), how long
    one more write waits to be durable, with a linger of 2 s and flushes of 1 ms."""
    log = SlowFlushLog(0.001)

    async def scenario() -> float:
        flusher = LogFlusher(1, 2000)
        commit = GroupCommit(log, flusher, lambda _end: None)
        try:
            log.end = 3
            await asyncio.gather(*(commit.durable(offset) for offset in range(3)))
            log.end = 4
            started = time.monotonic()
            await asyncio.wait_for(commit.durable(3, at_once=at_once), 10)
            return time.monotonic() - started
        finally:
            flusher.shutdown()

    return asyncio.run(scenario())


def test_a_write_nothing_follows_is_flushed_without_lingering() -> None:
    """A transaction's marker (nothing of its producer follows it until it is durable) starts
    its flush at once; an ordinary request lingers for the requests expected to join it."""
    assert time_to_durable(at_once=True) < 0.5
    assert time_to_durable(at_once=False) >= 1.5
