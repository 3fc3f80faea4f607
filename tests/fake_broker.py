"""A tiny in-memory broker built on the protocol module, for the client tests.

It routes as a real server must: RequestHeader.from_header (a FrameError closes the
connection), decode_request (an error is answered with ResponseHeader.for_error), then one
handler per API. Requests are handled concurrently, so responses may overtake each other.
Faults are injected per API: answer with an error code, drop the connection, or stay silent.
tests/test_client_fake_broker.py checks the fake itself where it stands in for the server.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import threading
from collections import deque
from collections.abc import Callable, Coroutine, Iterator
from dataclasses import dataclass, field
from typing import Any

from odradek.errors import (
    InvalidPartitionsError,
    KafkaError,
    OffsetOutOfRangeError,
    TopicAlreadyExistsError,
    UnknownTopicOrPartitionError,
    error_for_code,
)
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.api_versions import ApiVersionsResponse, supported_api_versions
from odradek.protocol.configs import (
    AlterConfigsResponse,
    ConfigEntry,
    ConfigSource,
    DescribeConfigsResponse,
    TopicConfigs,
)
from odradek.protocol.delete_records import (
    DeleteRecordsPartitionResponse,
    DeleteRecordsResponse,
)
from odradek.protocol.describe_topic_partitions import (
    DescribeTopicPartitionsResponse,
    PartitionDescription,
    TopicDescription,
)
from odradek.protocol.fetch import FetchResponse
from odradek.protocol.frame import FrameDecoder, FrameError
from odradek.protocol.header import RequestHeader, ResponseHeader
from odradek.protocol.init_producer_id import InitProducerIdResponse
from odradek.protocol.list_offsets import ListOffsetsPartitionResponse, ListOffsetsResponse
from odradek.protocol.messages import decode_request, encode_response
from odradek.protocol.metadata import (
    BrokerMetadata,
    MetadataResponse,
    PartitionMetadata,
    TopicMetadata,
)
from odradek.protocol.produce import ProduceResponse
from odradek.protocol.schema import Message
from odradek.protocol.topics import (
    CreatableTopicResult,
    CreateTopicsResponse,
    DeleteTopicsResponse,
    TopicResult,
)
from odradek.protocol.values.delete_records import HIGH_WATERMARK_OFFSET
from odradek.protocol.values.fetch import FetchPartitionResponse
from odradek.protocol.values.list_offsets import EARLIEST_TIMESTAMP, LATEST_TIMESTAMP
from odradek.protocol.values.produce import Acks, ProducePartitionResponse
from odradek.record.memory_records import MemoryRecords
from odradek.record.record_batch import RecordBatch, set_base_offset
from odradek.record.record_batch_builder import build_batch

DEFAULTS = {"retention.ms": "604800000", "cleanup.policy": "delete"}


@dataclass
class PartitionLog:
    """Batches with broker-assigned offsets; the high watermark is the log end offset."""

    batches: list[bytes] = field(default_factory=list)
    log_start_offset: int = 0
    log_end_offset: int = 0

    def append(self, records: memoryview) -> int:
        base_offset = self.log_end_offset
        batches = list(MemoryRecords(records).batches())
        for batch in batches:
            batch.ensure_valid()
        for batch in batches:
            data = bytearray(batch.to_bytes())
            set_base_offset(data, 0, self.log_end_offset)
            self.batches.append(bytes(data))
            self.log_end_offset += batch.last_offset_delta + 1
        return base_offset

    def read(self, offset: int, max_bytes: int) -> bytes:
        """From the batch holding ``offset``, cut at ``max_bytes`` but at least one batch."""
        selected = [b for b in self.batches if RecordBatch(b).last_offset >= offset]
        data = b"".join(selected)
        return data[: max(max_bytes, len(selected[0]))] if selected else b""

    def offset_for_time(self, timestamp: int) -> tuple[int, int]:
        for batch in self.batches:
            for record in RecordBatch(batch).records():
                if record.offset >= self.log_start_offset and record.timestamp >= timestamp:
                    return record.offset, record.timestamp
        return -1, -1


def fill(log: PartitionLog, count: int, per_batch: int = 5, **builder_options) -> None:
    """Append ``count`` records (value b"v<i>", timestamp 1000 + i) in batches of ``per_batch``."""
    start = log.log_end_offset
    for first in range(start, start + count, per_batch):
        rows = [(1000 + i, None, f"v{i}".encode(), ()) for i in range(first, start + count)]
        log.append(memoryview(build_batch(rows[:per_batch], **builder_options)))


@dataclass
class Fault:
    api_key: ApiKey
    action: str  # "error" (per partition), "reject" (whole request), "drop" or "silence"
    error_code: int = 0


class FakeBroker:
    """Serves the protocol from memory on 127.0.0.1 at an ephemeral port."""

    def __init__(self, default_partitions: int = 1, auto_create: bool = True) -> None:
        self.default_partitions = default_partitions
        self.auto_create = auto_create
        self.topics: dict[str, list[PartitionLog]] = {}
        self.configs: dict[str, dict[str, str]] = {}
        self.requests: list[tuple[RequestHeader, Message]] = []
        self.faults: deque[Fault] = deque()
        self.producer_ids = 0
        self.api_versions = supported_api_versions()
        self.connections: list[asyncio.Transport] = []
        self._appended = asyncio.Event()
        self._server: asyncio.Server | None = None

    async def start(self) -> FakeBroker:
        loop = asyncio.get_running_loop()
        self._server = await loop.create_server(lambda: BrokerConnection(self), "127.0.0.1", 0)
        return self

    async def stop(self) -> None:
        self._server.close()
        for transport in self.connections:
            transport.abort()
        await self._server.wait_closed()

    async def __aenter__(self) -> FakeBroker:
        return await self.start()

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()

    @property
    def port(self) -> int:
        return self._server.sockets[0].getsockname()[1]

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.port}"

    def inject(self, api_key: ApiKey, action: str, error_code: int = 0, times: int = 1) -> None:
        self.faults.extend(Fault(api_key, action, error_code) for _ in range(times))

    def create(self, topic: str, partitions: int = 1) -> list[PartitionLog]:
        self.topics[topic] = [PartitionLog() for _ in range(partitions)]
        self.configs[topic] = {}
        return self.topics[topic]

    def wake_fetchers(self) -> None:
        """Answer the fetches waiting for data (call after appending to a log directly)."""
        self._appended.set()
        self._appended = asyncio.Event()

    def requests_of(self, api_key: ApiKey) -> list[Message]:
        return [request for header, request in self.requests if header.api_key == api_key]

    def take_fault(self, api_key: int) -> Fault | None:
        for fault in self.faults:
            if fault.api_key == api_key:
                self.faults.remove(fault)
                return fault
        return None

    def partition(self, topic: str, partition: int) -> PartitionLog:
        logs = self.topics.get(topic)
        if logs is None or not 0 <= partition < len(logs):
            raise UnknownTopicOrPartitionError(f"{topic}-{partition} does not exist")
        return logs[partition]

    async def handle(self, header: RequestHeader, request: Message, fault: Fault | None) -> Message:
        handler = getattr(self, f"_{ApiKey(header.api_key).name.lower()}")
        return await handler(request, fault)

    async def _api_versions(self, request, fault):
        return ApiVersionsResponse(self.api_versions, 1, "fake-cluster", "test", 1 << 20)

    async def _metadata(self, request, fault):
        names = list(self.topics) if request.topics is None else request.topics
        topics = []
        for name in names:
            if name not in self.topics and request.allow_auto_topic_creation and self.auto_create:
                self.create(name, self.default_partitions)
            if name in self.topics:
                partitions = tuple(
                    PartitionMetadata(i, leader=1) for i in range(len(self.topics[name]))
                )
                topics.append(TopicMetadata(name, partitions=partitions))
            else:
                topics.append(TopicMetadata(name, UnknownTopicOrPartitionError.code, "unknown"))
        return MetadataResponse(
            BrokerMetadata(1, "127.0.0.1", self.port), "fake-cluster", tuple(topics)
        )

    async def _init_producer_id(self, request, fault):
        if fault is not None and fault.action == "error":
            raise error_for_code(fault.error_code)
        if request.producer_id >= 0:
            return InitProducerIdResponse(
                producer_id=request.producer_id, producer_epoch=request.producer_epoch + 1
            )
        self.producer_ids += 1
        return InitProducerIdResponse(producer_id=self.producer_ids - 1, producer_epoch=0)

    async def _produce(self, request, fault):
        answers = []
        for data in request.partitions:
            if fault is not None and fault.action == "error":
                answers.append(
                    ProducePartitionResponse(data.topic, data.partition, fault.error_code)
                )
                continue
            try:
                log = self.partition(data.topic, data.partition)
                base_offset = log.append(data.records)
            except KafkaError as error:
                answers.append(
                    ProducePartitionResponse(data.topic, data.partition, error.code, error.message)
                )
                continue
            answers.append(
                ProducePartitionResponse(
                    data.topic,
                    data.partition,
                    base_offset=base_offset,
                    log_start_offset=log.log_start_offset,
                )
            )
        self.wake_fetchers()
        return ProduceResponse(tuple(answers))

    async def _fetch(self, request, fault):
        if not any(self._readable(p) for p in request.partitions) and request.max_wait_ms:
            try:
                async with asyncio.timeout(request.max_wait_ms / 1000):
                    await self._appended.wait()
            except TimeoutError:
                pass
        answers = []
        for wanted in request.partitions:
            try:
                log = self.partition(wanted.topic, wanted.partition)
            except KafkaError as error:
                answers.append(FetchPartitionResponse(wanted.topic, wanted.partition, error.code))
                continue
            if fault is not None and fault.action == "error":
                answers.append(
                    FetchPartitionResponse(
                        wanted.topic, wanted.partition, fault.error_code, "injected"
                    )
                )
                continue
            if not log.log_start_offset <= wanted.fetch_offset <= log.log_end_offset:
                answers.append(
                    FetchPartitionResponse(
                        wanted.topic,
                        wanted.partition,
                        OffsetOutOfRangeError.code,
                        f"offset {wanted.fetch_offset} of {wanted.topic}-{wanted.partition} is "
                        f"out of range [{log.log_start_offset}, {log.log_end_offset}]",
                        high_watermark=log.log_end_offset,
                        log_start_offset=log.log_start_offset,
                    )
                )
                continue
            answers.append(
                FetchPartitionResponse(
                    wanted.topic,
                    wanted.partition,
                    0,
                    None,
                    log.log_end_offset,
                    log.log_start_offset,
                    log.log_end_offset,
                    log.read(wanted.fetch_offset, wanted.partition_max_bytes),
                )
            )
        return FetchResponse(tuple(answers))

    def _readable(self, wanted) -> bool:
        logs = self.topics.get(wanted.topic, [])
        return wanted.partition < len(logs) and logs[wanted.partition].log_end_offset > (
            wanted.fetch_offset
        )

    async def _list_offsets(self, request, fault):
        answers = []
        for wanted in request.partitions:
            try:
                log = self.partition(wanted.topic, wanted.partition)
            except KafkaError as error:
                answers.append(
                    ListOffsetsPartitionResponse(
                        wanted.topic, wanted.partition, error.code, error.message
                    )
                )
                continue
            if wanted.timestamp == EARLIEST_TIMESTAMP:
                offset, timestamp = log.log_start_offset, -1
            elif wanted.timestamp == LATEST_TIMESTAMP:
                offset, timestamp = log.log_end_offset, -1
            else:
                offset, timestamp = log.offset_for_time(wanted.timestamp)
            answers.append(
                ListOffsetsPartitionResponse(
                    wanted.topic, wanted.partition, offset=offset, timestamp=timestamp
                )
            )
        return ListOffsetsResponse(tuple(answers))

    async def _create_topics(self, request, fault):
        results = []
        for topic in request.topics:
            if topic.name in self.topics:
                results.append(
                    CreatableTopicResult(
                        topic.name,
                        TopicAlreadyExistsError.code,
                        f"Topic '{topic.name}' already exists.",
                    )
                )
            elif topic.num_partitions == 0 or topic.num_partitions < -1:
                results.append(
                    CreatableTopicResult(
                        topic.name, InvalidPartitionsError.code, "num_partitions must be -1 or > 0"
                    )
                )
            else:
                count = (
                    self.default_partitions if topic.num_partitions == -1 else topic.num_partitions
                )
                if not request.validate_only:
                    self.create(topic.name, count)
                    self.configs[topic.name] = dict(topic.configs)
                results.append(CreatableTopicResult(topic.name, num_partitions=count))
        return CreateTopicsResponse(tuple(results))

    async def _delete_topics(self, request, fault):
        results = []
        for name in request.topics:
            if self.topics.pop(name, None) is None:
                results.append(TopicResult(name, UnknownTopicOrPartitionError.code, "unknown"))
            else:
                results.append(TopicResult(name))
        return DeleteTopicsResponse(tuple(results))

    async def _delete_records(self, request, fault):
        answers = []
        for wanted in request.partitions:
            log = self.partition(wanted.topic, wanted.partition)
            target = log.log_end_offset if wanted.offset == HIGH_WATERMARK_OFFSET else wanted.offset
            log.log_start_offset = max(log.log_start_offset, target)
            answers.append(
                DeleteRecordsPartitionResponse(
                    wanted.topic, wanted.partition, low_watermark=log.log_start_offset
                )
            )
        return DeleteRecordsResponse(tuple(answers))

    def _entries(self, topic: str) -> tuple[ConfigEntry, ...]:
        overrides = self.configs[topic]
        entries = [
            ConfigEntry(k, v, ConfigSource.DYNAMIC_TOPIC_CONFIG, False)
            for k, v in overrides.items()
        ]
        entries += [
            ConfigEntry(k, v, ConfigSource.DEFAULT_CONFIG, True)
            for k, v in DEFAULTS.items()
            if k not in overrides
        ]
        return tuple(entries)

    async def _describe_configs(self, request, fault):
        results = []
        for name in request.topics:
            if name not in self.topics:
                results.append(TopicConfigs(name, UnknownTopicOrPartitionError.code, "unknown"))
            else:
                results.append(TopicConfigs(name, entries=self._entries(name)))
        return DescribeConfigsResponse(tuple(results))

    async def _alter_configs(self, request, fault):
        results = []
        for topic in request.topics:
            if topic.name not in self.topics:
                results.append(
                    TopicResult(topic.name, UnknownTopicOrPartitionError.code, "unknown")
                )
                continue
            if not request.validate_only:
                for key, value in topic.configs.items():
                    if value is None:
                        self.configs[topic.name].pop(key, None)
                    else:
                        self.configs[topic.name][key] = value
            results.append(TopicResult(topic.name))
        return AlterConfigsResponse(tuple(results))

    async def _describe_topic_partitions(self, request, fault):
        names = list(self.topics) if request.topics is None else request.topics
        topics = []
        for name in names:
            if name not in self.topics:
                topics.append(TopicDescription(name, UnknownTopicOrPartitionError.code, "unknown"))
                continue
            partitions = tuple(
                PartitionDescription(
                    i,
                    0,
                    None,
                    log.log_start_offset,
                    log.log_end_offset,
                    log.log_end_offset,
                    sum(map(len, log.batches)),
                    1,
                    "/fake",
                )
                for i, log in enumerate(self.topics[name])
            )
            topics.append(
                TopicDescription(name, partitions=partitions, configs=self._entries(name))
            )
        return DescribeTopicPartitionsResponse(tuple(topics))


class BrokerConnection(asyncio.Protocol):
    """One client connection to the fake broker, routing requests as the real server will."""

    def __init__(self, broker: FakeBroker) -> None:
        self.broker = broker
        self.decoder = FrameDecoder(max_frame_bytes=64 * 1024 * 1024)
        self.transport: asyncio.Transport | None = None

    def connection_made(self, transport: asyncio.Transport) -> None:
        self.transport = transport
        self.broker.connections.append(transport)

    def data_received(self, data: bytes) -> None:
        try:
            frames = self.decoder.feed(data)
            headers = [(RequestHeader.from_header(frame.header), frame) for frame in frames]
        except FrameError:
            self.transport.close()
            return
        for header, frame in headers:
            asyncio.get_running_loop().create_task(self.serve(header, frame))

    async def serve(self, header: RequestHeader, frame) -> None:
        try:
            request = decode_request(header, frame)
        except KafkaError as error:
            self.reject(header, error)
            return
        self.broker.requests.append((header, request))
        fault = self.broker.take_fault(header.api_key)
        if fault is not None and fault.action == "reject":
            self.reject(header, error_for_code(fault.error_code, "injected"))
            return
        if fault is not None and fault.action == "drop":
            self.transport.abort()
            return
        if fault is not None and fault.action == "silence":
            return
        response = await self.broker.handle(header, request, fault)
        if header.api_key == ApiKey.PRODUCE and request.acks == Acks.NONE:
            return
        if not self.transport.is_closing():
            self.transport.writelines(
                encode_response(ResponseHeader(header.correlation_id), response)
            )

    def reject(self, header: RequestHeader, error: KafkaError) -> None:
        self.transport.writelines(
            encode_response(ResponseHeader.for_error(header.correlation_id, error))
        )


@contextlib.contextmanager
def broker_in_thread(**options: Any) -> Iterator[FakeBroker]:
    """A fake broker serving from its own event loop thread, for testing the sync clients."""
    loop = asyncio.new_event_loop()
    started = threading.Event()
    stop = asyncio.Event()
    holder: list[FakeBroker] = []

    async def serve() -> None:
        async with FakeBroker(**options) as broker:
            holder.append(broker)
            started.set()
            await stop.wait()

    thread = threading.Thread(target=loop.run_until_complete, args=(serve(),))
    thread.start()
    started.wait(5)
    try:
        yield holder[0]
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(5)
        loop.close()


def async_test(test: Callable[..., Coroutine[Any, Any, None]]) -> Callable[..., None]:
    """Run an async test function on a fresh event loop, bounded to 20 s."""

    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> None:
        async def bounded() -> None:
            async with asyncio.timeout(20):
                await test(*args, **kwargs)

        asyncio.run(bounded())

    return run
