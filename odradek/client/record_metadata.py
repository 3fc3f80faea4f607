"""Where a produced record landed, and the future a send returns for it."""

from __future__ import annotations

import concurrent.futures
import time
from collections.abc import Callable, Generator
from typing import Any, NamedTuple

from odradek.client.produce_request_result import ProduceRequestResult
from odradek.errors import KafkaError


class RecordMetadata(NamedTuple):
    """The record's partition and offset, and its timestamp (the broker's under LogAppendTime).

    A NamedTuple rather than a dataclass: one is made per record, and tuples are cheaper.
    """

    topic: str
    partition: int
    offset: int
    timestamp: int


class FutureRecordMetadata:
    """The outcome of one send: await it, or block on :meth:`result` from another thread.

    Like Kafka's, it holds only its batch's shared result and the record's place in the batch,
    which keeps a send cheap. Done callbacks run on the producer's event loop thread.
    """

    __slots__ = ("_result", "_topic", "_partition", "_relative_offset", "_timestamp")

    def __init__(
        self,
        result: ProduceRequestResult,
        topic: str,
        partition: int,
        relative_offset: int,
        timestamp: int,
    ) -> None:
        self._result = result
        self._topic = topic
        self._partition = partition
        self._relative_offset = relative_offset
        self._timestamp = timestamp

    def done(self) -> bool:
        return self._result.is_done

    def result(self, timeout: float | None = None) -> RecordMetadata:
        """Block until the record is acknowledged; raise its error if it failed.

        Never call this on the producer's event loop thread: await the future there.
        """
        if not self._result.wait(timeout):
            raise concurrent.futures.TimeoutError(f"record not acknowledged within {timeout}s")
        return self._metadata()

    def exception(self, timeout: float | None = None) -> KafkaError | None:
        if not self._result.wait(timeout):
            raise concurrent.futures.TimeoutError(f"record not acknowledged within {timeout}s")
        return self._result.error

    def add_done_callback(self, callback: Callable[[FutureRecordMetadata], Any]) -> None:
        self._result.add_callback(lambda: callback(self))

    def __await__(self) -> Generator[Any, None, RecordMetadata]:
        if not self._result.is_done:
            yield from self._result.completion().__await__()
        return self._metadata()

    def _metadata(self) -> RecordMetadata:
        result = self._result
        if result.error is not None:
            raise result.error
        offset = result.base_offset + self._relative_offset if result.base_offset >= 0 else -1
        timestamp = result.log_append_time_ms if result.log_append_time_ms >= 0 else self._timestamp
        return RecordMetadata(self._topic, self._partition, offset, timestamp)


class FutureRecordsMetadata:
    """The outcome of a :meth:`~odradek.client.producer.AsyncProducer.send_many`: await it, or
    block on :meth:`result`, for each record's RecordMetadata, in the order sent.

    It holds, per batch the records went into, the batch's shared result, its partition, the
    first record's place in the batch and how many records it took: nothing per record until
    asked. ``positions`` (records spread over partitions by key) says where each record, in
    the order of the batches, was in the order sent.
    """

    __slots__ = ("_parts", "_topic", "_timestamp", "_positions")

    def __init__(
        self,
        parts: list[tuple[ProduceRequestResult, int, int, int]],
        topic: str,
        timestamp: int,
        positions: list[int] | None = None,
    ) -> None:
        self._parts = parts
        self._topic = topic
        self._timestamp = timestamp
        self._positions = positions

    @classmethod
    def of_groups(
        cls, groups: list[tuple[FutureRecordsMetadata, list[int]]]
    ) -> FutureRecordsMetadata:
        """One future for records sent in groups (one per partition): each group's future
        and the places its records had in the order sent."""
        parts = [part for future, _ in groups for part in future._parts]
        positions = [position for _, indexes in groups for position in indexes]
        return cls(parts, groups[0][0]._topic, groups[0][0]._timestamp, positions)

    def done(self) -> bool:
        return all(part[0].is_done for part in self._parts)

    def result(self, timeout: float | None = None) -> list[RecordMetadata]:
        """Block until every record is acknowledged; the first batch's error if one failed
        (the records of the other batches may have been stored).

        Never call this on the producer's event loop thread: await the future there.
        """
        deadline = None if timeout is None else time.monotonic() + timeout
        for part in self._parts:
            left = None if deadline is None else max(0.0, deadline - time.monotonic())
            if not part[0].wait(left):
                raise concurrent.futures.TimeoutError(f"records not acknowledged within {timeout}s")
        return self._metadata()

    def __await__(self) -> Generator[Any, None, list[RecordMetadata]]:
        for part in self._parts:
            if not part[0].is_done:
                yield from part[0].completion().__await__()
        return self._metadata()

    def _metadata(self) -> list[RecordMetadata]:
        topic = self._topic
        metadata: list[RecordMetadata] = []
        for result, partition, first, count in self._parts:
            if result.error is not None:
                raise result.error
            timestamp = (
                result.log_append_time_ms if result.log_append_time_ms >= 0 else self._timestamp
            )
            base = result.base_offset
            offsets = range(base + first, base + first + count) if base >= 0 else [-1] * count
            metadata += [RecordMetadata(topic, partition, offset, timestamp) for offset in offsets]
        positions = self._positions
        if positions is None:
            return metadata
        in_order: list[Any] = [None] * len(metadata)
        for position, record in zip(positions, metadata, strict=True):
            in_order[position] = record
        return in_order
