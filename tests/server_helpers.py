"""Helpers shared by the server tests: a broker on its own event loop thread, raw sockets."""

from __future__ import annotations

import socket
import time
import urllib.request
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import log_helpers
from prometheus_client.parser import text_string_to_metric_families

from odradek.client.event_loop_thread import EventLoopThread
from odradek.clock import SYSTEM_CLOCK, Clock
from odradek.config.broker_config_loader import load_broker_config
from odradek.protocol.fetch import FetchRequest
from odradek.protocol.frame import Frame, FrameDecoder, encode_frame
from odradek.protocol.header import RequestHeader, ResponseHeader
from odradek.protocol.messages import encode_request, response_type
from odradek.protocol.schema import Message
from odradek.protocol.values.fetch import FetchPartition
from odradek.record.memory_records import MemoryRecords
from odradek.server.broker import Broker

__all__ = ["RawClient", "RunningBroker", "batch", "read_partition", "running_broker"]


def batch(count: int = 1, **options: object) -> bytes:
    """A producer batch of ``count`` records stamped now (old timestamps would make the log
    roll a segment per append: segment.ms counts from the first batch's timestamp)."""
    return log_helpers.batch(count, timestamp=int(time.time() * 1000), **options)


@dataclass
class RunningBroker:
    """A started broker and the thread its event loop runs on."""

    broker: Broker
    loop_thread: EventLoopThread

    @property
    def port(self) -> int:
        return self.broker.port

    @property
    def bootstrap(self) -> str:
        return f"127.0.0.1:{self.broker.port}"

    @property
    def data_dir(self) -> Path:
        return self.broker.log_manager.log_dirs[0]

    def connect(self, timeout: float = 10.0) -> RawClient:
        return RawClient(socket.create_connection(("127.0.0.1", self.port), timeout=timeout))

    def metrics(self) -> dict[str, float]:
        """Every sample of /metrics as ``name{label="v",...}`` -> value."""
        url = f"http://127.0.0.1:{self.broker.metrics_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as response:
            text = response.read().decode()
        samples = {}
        for family in text_string_to_metric_families(text):
            for sample in family.samples:
                labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
                samples[f"{sample.name}{{{labels}}}" if labels else sample.name] = sample.value
        return samples


@contextmanager
def running_broker(
    tmp_path: Path, settings: Mapping[str, str] | None = None, clock: Clock = SYSTEM_CLOCK
) -> Iterator[RunningBroker]:
    """A broker on ``tmp_path/data`` with ephemeral ports and the given Kafka-named settings."""
    overrides = {"log.dirs": str(tmp_path / "data"), "port": "0", "metrics.port": "0"}
    overrides.update(settings or {})
    config = load_broker_config(overrides=overrides)
    loop_thread = EventLoopThread(name="test-broker-loop")
    broker = loop_thread.call(Broker, config, clock)
    loop_thread.run(broker.start(), timeout=30)
    try:
        yield RunningBroker(broker, loop_thread)
    finally:
        loop_thread.run(broker.stop(), timeout=30)
        loop_thread.loop.call_soon_threadsafe(loop_thread.loop.stop)


class RawClient:
    """A blocking socket speaking frames: what the tests use to send any bytes at all."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self._decoder = FrameDecoder(1 << 30)
        self._frames: list[Frame] = []
        self._next_id = 0
        self.client_id = "raw-test"

    def close(self) -> None:
        self.sock.close()

    def __enter__(self) -> RawClient:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    def send(
        self, request: Message, version: int | None = None, correlation_id: int | None = None
    ) -> int:
        """Send ``request`` (as ``version``, by default the message's own); return its
        correlation id."""
        if version is None:
            version = request.wire_version
        if correlation_id is None:
            correlation_id, self._next_id = self._next_id, self._next_id + 1
        header = RequestHeader(request.api_key, version, correlation_id, self.client_id)
        self.sock.sendall(b"".join(bytes(part) for part in encode_request(header, request)))
        return correlation_id

    def send_frame(self, header: Mapping[str, Any], payload: bytes = b"") -> None:
        self.sock.sendall(encode_frame(header, payload))

    def read_frame(self) -> Frame:
        """The next response frame; ConnectionError if the broker closed the connection."""
        while not self._frames:
            data = self.sock.recv(1 << 20)
            if not data:
                raise ConnectionError("the broker closed the connection")
            self._frames.extend(self._decoder.feed(data))
        return self._frames.pop(0)

    def read_response(self, request: Message) -> tuple[ResponseHeader, Message | None]:
        """The next response, decoded as the answer to a request like ``request``."""
        frame = self.read_frame()
        header = ResponseHeader.from_header(frame.header)
        if header.error:
            return header, None
        message_type = response_type(request.api_key, request.wire_version)
        return header, message_type.from_header(frame.header, frame.payload)

    def call(self, request: Message) -> Message:
        """Send ``request`` and return its decoded response (asserting no request error)."""
        correlation_id = self.send(request)
        header, response = self.read_response(request)
        assert header.correlation_id == correlation_id
        assert header.error == 0, header
        return response

    def is_closed_by_peer(self, timeout: float = 5.0) -> bool:
        """True when the broker closes the connection within ``timeout`` (nothing else sent)."""
        self.sock.settimeout(timeout)
        try:
            while data := self.sock.recv(65536):
                self._frames.extend(self._decoder.feed(data))
        except ConnectionResetError:
            return True
        except TimeoutError:
            return False
        return True


def read_partition(client: RawClient, topic: str, partition: int) -> dict[int, bytes]:
    """Every record of a partition below its high watermark, by offset."""
    found: dict[int, bytes] = {}
    offset = 0
    while True:
        request = FetchRequest((FetchPartition(topic, partition, offset, 1 << 20),), max_wait_ms=0)
        response = client.call(request).partitions[0]
        assert response.error == 0, response
        records = [r for r in MemoryRecords(response.records).records() if r.offset >= offset]
        if not records:
            return found
        found.update((r.offset, r.value) for r in records)
        offset = records[-1].offset + 1
