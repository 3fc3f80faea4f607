"""Where a produced record landed, and the future a send returns for it."""

from __future__ import annotations

import concurrent.futures
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
