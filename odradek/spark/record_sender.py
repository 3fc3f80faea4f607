"""Writing the rows of Arrow batches to topics through the project's producer."""

from __future__ import annotations

import itertools
from collections import deque
from collections.abc import Iterable, Iterator
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from odradek.client import FutureRecordMetadata, Producer
from odradek.errors import KafkaError
from odradek.spark.client_cache import ClientCache, settings_key
from odradek.spark.record_rejected import RecordRejectedError
from odradek.spark.sink_options import SinkOptions

# Bigger batches than a producer's default: a write sends many records at once.
# Options kafka.batch.size and kafka.linger.ms override these.
WRITE_DEFAULTS = {"batch_size": 256 * 1024, "linger_ms": 10}

PRODUCERS: ClientCache[Producer] = ClientCache(discard=lambda producer: producer.close(0))
"""This worker's producers, one per settings, kept between tasks once they flushed all they
were given; one whose write failed is closed at once, dropping what it still held."""

Row = tuple[str, bytes | None, bytes | None, tuple[tuple[str, bytes | None], ...], int | None]


class RecordSender:
    """Sends rows (value, and optional key, topic, partition, headers) with ``producer`` and
    checks delivery.

    The producer batches and compresses as configured; a delivery error fails the write at
    a later batch of rows or at :meth:`finish`. Outcomes are checked oldest first, as far as
    they are known, which is cheaper than a callback per record.
    """

    def __init__(self, producer: Producer, topic: str | None) -> None:
        self._topic = topic
        self._producer = producer
        self._sent = 0
        self._unchecked: deque[tuple[str, FutureRecordMetadata]] = deque()

    def send(self, batch: pa.RecordBatch) -> None:
        """Queue the rows of ``batch``; raise RecordRejectedError if a record failed so far."""
        for topic, value, key, headers, partition in rows(batch, self._topic):
            try:
                future = self._producer.send(topic, value, key, headers, partition)
            except KafkaError as error:
                raise RecordRejectedError(_refusal(topic, error)) from error
            self._unchecked.append((topic, future))
            self._sent += 1
        self._check_outcomes()

    def finish(self) -> int:
        """Wait until every record is acknowledged; how many were written."""
        self._producer.flush()
        self._check_outcomes()
        return self._sent

    def _check_outcomes(self) -> None:
        """Raise RecordRejectedError for a failed record, up to the first one still in flight."""
        unchecked = self._unchecked
        while unchecked and unchecked[0][1].done():
            topic, future = unchecked.popleft()
            error = future.exception(0)
            if error is not None:
                raise RecordRejectedError(_refusal(topic, error)) from error


def send_batches(batches: Iterable[pa.RecordBatch], options: SinkOptions) -> int:
    """Write the rows of ``batches``, and wait for them; how many were written."""
    configs = {**WRITE_DEFAULTS, **options.client_configs()}
    with PRODUCERS.lend(settings_key(configs), lambda: Producer(**configs)) as producer:
        sender = RecordSender(producer, options.topic)
        for batch in batches:
            sender.send(batch)
        return sender.finish()


def rows(batch: pa.RecordBatch, topic: str | None) -> Iterator[Row]:
    """(topic, value, key, headers, partition) per row; the ``topic`` option beats the column."""
    count = batch.num_rows
    topics = itertools.repeat(topic, count) if topic else _column(batch, "topic", None)
    headers = (
        () if row is None else tuple((h["key"], h["value"]) for h in row)
        for row in _column(batch, "headers", None)
    )
    return zip(
        _checked_topics(topics),
        _bytes(batch, "value"),
        _bytes(batch, "key"),
        headers,
        _column(batch, "partition", None),
        strict=True,
    )


def _column(batch: pa.RecordBatch, name: str, missing: Any) -> Iterable[Any]:
    if name not in batch.schema.names:
        return itertools.repeat(missing, batch.num_rows)
    return batch.column(name).to_pylist()


def _bytes(batch: pa.RecordBatch, name: str) -> Iterable[bytes | None]:
    """A binary or string column as bytes (strings in UTF-8)."""
    if name not in batch.schema.names:
        return itertools.repeat(None, batch.num_rows)
    return pc.cast(batch.column(name), pa.binary()).to_pylist()


def _checked_topics(topics: Iterable[str | None]) -> Iterator[str]:
    for topic in topics:
        if topic is None:
            raise ValueError("a row has a null topic; set the option topic or fill the column")
        yield topic


def _refusal(topic: str, error: BaseException) -> str:
    return f"the broker refused a record for topic {topic!r}: {error}"
