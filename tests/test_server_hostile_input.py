"""Cheap hostile input against a broker process: decompression bombs, half-sent large frames
and trickled requests cost the offender its connection or its produce, never the broker its
memory or other clients their answers; on odradek's protocol and on Kafka's alike."""

from __future__ import annotations

import resource
import socket
import struct
import threading
import time
import urllib.request
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import psutil
import pytest
import zstandard
from prometheus_client.parser import text_string_to_metric_families
from serve_process import ServeProcess
from server_helpers import RawClient, batch

from odradek.errors import RecordListTooLargeError
from odradek.protocol.api_versions import ApiVersionsRequest
from odradek.protocol.kafka.byte_reader import ByteReader
from odradek.protocol.produce import ProduceRequest
from odradek.protocol.topics import CreatableTopic, CreateTopicsRequest
from odradek.protocol.values.produce import Acks, ProducePartitionData
from odradek.record.batch_header import BatchHeader
from odradek.record.compression import CompressionType
from odradek.record.record_batch import HEADER_SIZE, HEADER_STRUCT, LOG_OVERHEAD, write_crc

MIB = 1024 * 1024
BOMB_ZEROS = 1024 * MIB
ADDRESS_SPACE_BYTES = 2048 * MIB
"""The broker's RLIMIT_AS in the bomb test: ~0.8 GB at start-up, so a 1 GiB expansion (let
alone its copy) cannot fit."""
MAX_MESSAGE_BYTES = 2 * MIB  # holds the gzip bombs (~1 MiB); zstd's are 32-100 KiB
DECOMPRESSION_RATIO = 8  # 16 MiB of records at most per batch
ANSWER_BOUND_S = 1.0


def limit_address_space() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (ADDRESS_SPACE_BYTES, ADDRESS_SPACE_BYTES))


def zeros_compressed(codec: CompressionType, crafted: bool) -> bytes:
    """``BOMB_ZEROS`` zero bytes in ``codec``: 16 MiB compressed once, repeated (gzip members
    or zstd frames, which both codecs read one after another). ``crafted`` hides the sizes the
    stream declares (zstd: no RLE blocks, a byte in 4 KiB set; gzip: the trailer zeroed), so
    the broker can only find out by decompressing."""
    chunk = bytes(16 * MIB)
    if codec is CompressionType.GZIP:
        part = zlib.compress(chunk, 9, wbits=31)
    else:
        if crafted:
            chunk = (bytes(4095) + b"\x01") * (len(chunk) // 4096)
        compressor = zstandard.ZstdCompressor(level=3).compressobj()  # no content size
        part = compressor.compress(chunk) + compressor.flush()
    stream = part * (BOMB_ZEROS // len(chunk))
    return stream[:-4] + bytes(4) if crafted and codec is CompressionType.GZIP else stream


def bomb_batch(codec: CompressionType, crafted: bool) -> bytes:
    """A producer batch claiming one record, whose records section is the compressed zeros."""
    records = zeros_compressed(codec, crafted)
    now = int(time.time() * 1000)
    batch_bytes = bytearray(HEADER_SIZE + len(records))
    header = BatchHeader(
        0, len(batch_bytes) - LOG_OVERHEAD, -1, 2, 0, int(codec), 0, now, now, -1, -1, -1, 1
    )
    HEADER_STRUCT.pack_into(batch_bytes, 0, *header)
    batch_bytes[HEADER_SIZE:] = records
    write_crc(batch_bytes, 0)
    return bytes(batch_bytes)


def connect(broker: ServeProcess) -> RawClient:
    return RawClient(socket.create_connection(("127.0.0.1", broker.port), timeout=30))


def produce(topic: str, records: bytes) -> ProduceRequest:
    return ProduceRequest((ProducePartitionData(topic, 0, records),), acks=Acks.LEADER)


def rss(broker: ServeProcess) -> int:
    return psutil.Process(broker.process.pid).memory_info().rss


class Pinger:
    """Another client asking the broker for its API versions in a loop: the longest answer."""

    def __init__(self, broker: ServeProcess) -> None:
        self._client = connect(broker)
        self._stop = threading.Event()
        self.longest_s = 0.0
        self.answers = 0
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            started = time.monotonic()
            self._client.call(ApiVersionsRequest())
            self.longest_s = max(self.longest_s, time.monotonic() - started)
            self.answers += 1
            time.sleep(0.01)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=30)
        self._client.close()


@pytest.fixture(scope="module")
def bombs() -> dict[tuple[CompressionType, bool], bytes]:
    return {
        (codec, crafted): bomb_batch(codec, crafted)
        for codec in (CompressionType.GZIP, CompressionType.ZSTD)
        for crafted in (False, True)
    }


@pytest.fixture(scope="module")
def broker_under_limit(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    """One broker for every bomb: each test measures from its own baseline, and the broker
    must serve on after all of them."""
    settings = {
        "message.max.bytes": MAX_MESSAGE_BYTES,
        "log.message.decompression.max.ratio": DECOMPRESSION_RATIO,
        "socket.request.max.bytes": 8 * MIB,
        "queued.max.request.bytes": 64 * MIB,
    }
    args = [arg for key, value in settings.items() for arg in ("--set", f"{key}={value}")]
    with ServeProcess(
        tmp_path_factory.mktemp("bombs") / "data",
        *args,
        preexec_fn=limit_address_space,
        env={"MALLOC_ARENA_MAX": "2"},  # threads' arenas would reserve 64 MiB of space each
    ) as broker:
        with connect(broker) as client:
            client.call(CreateTopicsRequest((CreatableTopic("bombs", 1),)))
        yield broker


@pytest.mark.parametrize("crafted", [False, True], ids=["declared", "crafted"])
@pytest.mark.parametrize(
    "codec", [CompressionType.GZIP, CompressionType.ZSTD], ids=lambda codec: codec.label
)
def test_decompression_bombs_are_refused_and_the_broker_serves_on(
    broker_under_limit: ServeProcess,
    bombs: dict[tuple[CompressionType, bool], bytes],
    codec: CompressionType,
    crafted: bool,
) -> None:
    broker, bomb = broker_under_limit, bombs[(codec, crafted)]
    with connect(broker) as client:  # warm up: threads and buffers a produce needs
        assert client.call(produce("bombs", batch(3))).partitions[0].error == 0
    baseline = rss(broker)
    pinger = Pinger(broker)
    clients = [connect(broker) for _ in range(2)]
    try:
        for client in clients:  # two at once, as in the report
            client.send(produce("bombs", bomb))
        results = [client.read_response(produce("bombs", bomb))[1] for client in clients]
    finally:
        pinger.stop()
        for client in clients:
            client.close()
    limit = MAX_MESSAGE_BYTES * DECOMPRESSION_RATIO
    for response in results:
        refused = response.partitions[0]
        assert refused.error == RecordListTooLargeError.code, refused
        assert f"decompress to more than {limit} bytes" in refused.message
        assert f"max.message.bytes {MAX_MESSAGE_BYTES}" in refused.message
    assert broker.process.poll() is None, "the broker died"
    assert pinger.answers > 0 and pinger.longest_s < ANSWER_BOUND_S, pinger.longest_s
    with connect(broker) as client:
        assert client.call(produce("bombs", batch(2))).partitions[0].error == 0
    grown = rss(broker) - baseline
    assert grown < 4 * limit, f"{grown / MIB:.0f} MiB still held after the bombs"
    await_true(lambda: request_memory(broker) == 0, 10, "request memory still reserved")


def send_half_frames(broker: ServeProcess, count: int, frame_size: int, sent: int) -> list:
    """``count`` connections that each announce a ``frame_size`` frame and send ``sent`` bytes
    of it, then nothing more."""
    sockets = []
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", broker.port), timeout=30)
        body = struct.pack(">I", 4) + b"\x81\xa1a\x01"  # header size 4: the map {"a": 1}
        sock.sendall(struct.pack(">I", frame_size) + (body + bytes(sent))[:sent])
        sockets.append(sock)
    return sockets


def request_memory(broker: ServeProcess) -> float:
    url = f"http://127.0.0.1:{broker.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    families = text_string_to_metric_families(text)
    gauge = next(family for family in families if family.name == "odradek_request_memory_bytes")
    return gauge.samples[0].value


def await_true(condition: Callable[[], bool], timeout_s: float, what: str) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, what
        time.sleep(0.05)


def closing_lines(broker: ServeProcess, peer: str) -> list[str]:
    """The broker's lines on ``peer``'s connection closed for an incomplete request, once one
    is there (a thread reads them from its stderr, a moment after the close)."""

    def lines() -> list[str]:
        return [line for line in broker.lines if "still incomplete after" in line and peer in line]

    await_true(
        lambda: bool(lines()), 10, f"{peer}'s connection was not logged as closed as incomplete"
    )
    return lines()


@pytest.fixture(scope="module")
def request_timeout_broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ServeProcess]:
    """One broker with a 2 s request timeout for the tests of that timeout: each uses its own
    connections and finds its own in the broker's log by their address."""
    with ServeProcess(
        tmp_path_factory.mktemp("request-timeout") / "data",
        "--set", "socket.request.timeout.ms=2000",
    ) as broker:  # fmt: skip
        yield broker


def test_half_sent_large_frames_hold_no_more_than_the_request_memory_bound(
    tmp_path: Path,
) -> None:
    bound = 32 * MIB
    with ServeProcess(
        tmp_path / "data",
        "--set", f"socket.request.max.bytes={16 * MIB}",
        "--set", f"queued.max.request.bytes={bound}",
        "--set", "socket.request.timeout.ms=4000",
    ) as broker:  # fmt: skip
        baseline = rss(broker)
        sockets = send_half_frames(broker, 100, 16 * MIB, 8)  # a size prefix and a few bytes
        time.sleep(1.0)
        after_prefixes = rss(broker) - baseline
        assert after_prefixes < 16 * MIB, f"{after_prefixes / MIB:.0f} MiB for 100 size prefixes"
        sockets += send_half_frames(broker, 40, 16 * MIB, 2 * MIB)  # 80 MiB, over the bound
        await_true(lambda: request_memory(broker) >= bound, 3.0, "the bound was never reached")
        time.sleep(0.5)  # time to read past the bound, if it did
        peak = rss(broker) - baseline
        assert peak < bound + 24 * MIB, f"{peak / MIB:.0f} MiB held, bound {bound / MIB:.0f} MiB"
        assert bound <= request_memory(broker) < bound + 8 * MIB  # reading stopped at the bound
        with connect(broker) as client:  # answered once the half frames time out
            started = time.monotonic()
            assert client.call(ApiVersionsRequest()).broker_id == 0
            assert time.monotonic() - started < 10
        await_true(
            lambda: sum("still incomplete after" in line for line in broker.lines) >= 100,
            10,
            "the half frames were not closed after socket.request.timeout.ms",
        )
        for sock in sockets:
            sock.close()
        await_true(lambda: request_memory(broker) == 0, 10, "request memory still reserved")


def test_a_trickled_request_is_closed_after_the_request_timeout(
    request_timeout_broker: ServeProcess,
) -> None:
    broker = request_timeout_broker
    with connect(broker) as slow, connect(broker) as other:
        peer = "{}:{}".format(*slow.sock.getsockname())
        # past the port's protocol detection: a msgpack frame's sizes and a map marker
        slow.sock.sendall(struct.pack(">II", 100, 13) + b"\x83")
        started = time.monotonic()
        closed = False
        while time.monotonic() - started < 8:
            try:
                slow.sock.sendall(b"\x00")  # one byte a second: each resets the idle timer
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            if slow.is_closed_by_peer(timeout=1.0):
                closed = True
                break
        elapsed = time.monotonic() - started
        assert other.call(ApiVersionsRequest()).broker_id == 0
    lines = closing_lines(broker, peer)
    assert closed and 1.5 < elapsed < 5, elapsed
    assert any(peer in line and "socket.request.timeout.ms=2000" in line for line in lines), lines


# --- the same inputs from a Kafka client: Kafka's framing, the same bounds ---------------------

RECORD_LIST_TOO_LARGE = 18


def uvarint(value: int) -> bytes:
    out = bytearray()
    while value >= 0x80:
        out.append(value & 0x7F | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def compact_string(text: str) -> bytes:
    return uvarint(len(text.encode()) + 1) + text.encode()


def kafka_produce_v9(topic: str, records: bytes, correlation_id: int = 1) -> bytes:
    """A whole Produce v9 request (flexible: header v2) for partition 0, acks=1, by hand:
    what any Kafka client would send."""
    header = struct.pack(">hhih", 0, 9, correlation_id, 4) + b"evil" + b"\x00"
    body = (
        b"\x00"  # transactional_id: null
        + struct.pack(">hi", 1, 30000)  # acks, timeout_ms
        + uvarint(2)  # one topic
        + compact_string(topic)
        + uvarint(2)  # one partition
        + struct.pack(">i", 0)
        + uvarint(len(records) + 1)
        + records
        + b"\x00"  # partition's tagged fields
        + b"\x00"  # topic's
        + b"\x00"  # request's
    )
    return struct.pack(">i", len(header) + len(body)) + header + body


def read_kafka_frame(sock: socket.socket) -> bytes:
    def exactly(count: int) -> bytes:
        data = b""
        while len(data) < count:
            chunk = sock.recv(count - len(data))
            if not chunk:
                raise ConnectionError("closed by the broker")
            data += chunk
        return data

    return exactly(struct.unpack(">i", exactly(4))[0])


def kafka_produce_v9_error(frame: bytes) -> tuple[int, str | None]:
    """The first partition's (error code, error message) of a Produce v9 response."""
    reader = ByteReader(memoryview(frame))
    reader.int32()  # correlation id
    reader.skip_tagged_fields()  # response header v1
    reader.unsigned_varint()  # topics
    reader.string(True, False)
    reader.unsigned_varint()  # partitions
    reader.int32()
    error = reader.int16()
    reader.int64(), reader.int64(), reader.int64()  # base offset, append time, start offset
    for _ in range(reader.unsigned_varint() - 1):  # record errors
        reader.int32(), reader.string(True, True)
        reader.skip_tagged_fields()
    return error, reader.string(True, True)


def closed_connections(broker: ServeProcess, reason: str) -> float:
    url = f"http://127.0.0.1:{broker.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=10) as response:
        text = response.read().decode()
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if (
                sample.name == "odradek_closed_connections_total"
                and sample.labels.get("reason") == reason
            ):
                return sample.value
    return 0.0


@pytest.mark.parametrize("crafted", [False, True], ids=["declared", "crafted"])
def test_a_kafka_produce_bomb_gets_record_list_too_large_and_the_broker_serves_on(
    broker_under_limit: ServeProcess,
    bombs: dict[tuple[CompressionType, bool], bytes],
    crafted: bool,
) -> None:
    broker, bomb = broker_under_limit, bombs[(CompressionType.ZSTD, crafted)]
    baseline = rss(broker)
    pinger = Pinger(broker)
    sockets = [socket.create_connection(("127.0.0.1", broker.port), timeout=30) for _ in range(2)]
    try:
        for sock in sockets:
            sock.sendall(kafka_produce_v9("bombs", bomb))
        results = [kafka_produce_v9_error(read_kafka_frame(sock)) for sock in sockets]
    finally:
        pinger.stop()
        for sock in sockets:
            sock.close()
    limit = MAX_MESSAGE_BYTES * DECOMPRESSION_RATIO
    for error, message in results:
        assert error == RECORD_LIST_TOO_LARGE, (error, message)
        assert f"decompress to more than {limit} bytes" in message
    assert broker.process.poll() is None, "the broker died"
    assert pinger.answers > 0 and pinger.longest_s < ANSWER_BOUND_S, pinger.longest_s
    with socket.create_connection(("127.0.0.1", broker.port), timeout=30) as sock:
        sock.sendall(kafka_produce_v9("bombs", batch(2)))
        assert kafka_produce_v9_error(read_kafka_frame(sock))[0] == 0
    grown = rss(broker) - baseline
    assert grown < 4 * limit, f"{grown / MIB:.0f} MiB still held after the bombs"
    await_true(lambda: request_memory(broker) == 0, 10, "request memory still reserved")


def send_half_kafka_frames(broker: ServeProcess, count: int, frame_size: int, sent: int) -> list:
    """``count`` connections that each announce a Kafka request of ``frame_size`` bytes (a
    Produce v9 header, so the port detects Kafka) and send ``sent`` bytes of it."""
    sockets = []
    header = struct.pack(">hhih", 0, 9, 1, 4) + b"evil" + b"\x00"
    for _ in range(count):
        sock = socket.create_connection(("127.0.0.1", broker.port), timeout=30)
        sock.sendall(struct.pack(">i", frame_size) + (header + bytes(sent))[:sent])
        sockets.append(sock)
    return sockets


def test_half_sent_large_kafka_frames_hold_no_more_than_the_request_memory_bound(
    tmp_path: Path,
) -> None:
    bound = 32 * MIB
    with ServeProcess(
        tmp_path / "data",
        "--set", f"socket.request.max.bytes={16 * MIB}",
        "--set", f"queued.max.request.bytes={bound}",
        "--set", "socket.request.timeout.ms=4000",
    ) as broker:  # fmt: skip
        baseline = rss(broker)
        sockets = send_half_kafka_frames(broker, 100, 16 * MIB, 16)  # a prefix and a header
        time.sleep(1.0)
        after_prefixes = rss(broker) - baseline
        assert after_prefixes < 16 * MIB, f"{after_prefixes / MIB:.0f} MiB for 100 size prefixes"
        sockets += send_half_kafka_frames(broker, 40, 16 * MIB, 2 * MIB)  # 80 MiB, over the bound
        await_true(lambda: request_memory(broker) >= bound, 3.0, "the bound was never reached")
        time.sleep(0.5)  # time to read past the bound, if it did
        peak = rss(broker) - baseline
        assert peak < bound + 24 * MIB, f"{peak / MIB:.0f} MiB held, bound {bound / MIB:.0f} MiB"
        assert bound <= request_memory(broker) < bound + 8 * MIB  # reading stopped at the bound
        with socket.create_connection(("127.0.0.1", broker.port), timeout=30) as sock:
            started = time.monotonic()  # answered once the half frames time out
            sock.sendall(struct.pack(">ihhih", 10, 18, 0, 7, 0))  # ApiVersions v0
            assert struct.unpack(">ih", read_kafka_frame(sock)[:6]) == (7, 0)
            assert time.monotonic() - started < 10
        await_true(
            lambda: sum("still incomplete after" in line for line in broker.lines) >= 140,
            10,
            "the half frames were not closed after socket.request.timeout.ms",
        )
        assert closed_connections(broker, "request_timeout") >= 140
        for sock in sockets:
            sock.close()
        await_true(lambda: request_memory(broker) == 0, 10, "request memory still reserved")


def test_a_request_slow_before_its_protocol_is_known_is_timed_from_its_first_byte(
    request_timeout_broker: ServeProcess,
) -> None:
    """8 bytes, a pause, then the 9th byte lets the port tell the protocol: the connection
    it goes to keeps the request's clock started by the first byte, not by the 9th."""
    broker = request_timeout_broker
    with socket.create_connection(("127.0.0.1", broker.port), timeout=30) as slow:
        first = struct.pack(">ihhih", 100, 18, 3, 1, 4)  # ApiVersions v3, 100 bytes
        slow.sendall(first[:8])
        started = time.monotonic()
        time.sleep(1.2)
        slow.sendall(first[8:])  # detected now: a Kafka connection takes over
        slow.settimeout(5.0)
        try:
            closed = slow.recv(1) == b""
        except ConnectionResetError:
            closed = True
        elapsed = time.monotonic() - started
    assert closed and 1.5 < elapsed < 2.9, elapsed  # not 1.2 s + 2 s


@pytest.mark.parametrize("detected", [True, False], ids=["kafka", "first-bytes"])
def test_a_trickled_kafka_request_is_closed_after_the_request_timeout(
    request_timeout_broker: ServeProcess, detected: bool
) -> None:
    """Trickled once the port knows it speaks Kafka, and trickled before it can tell."""
    broker = request_timeout_broker
    timed_out_before = closed_connections(broker, "request_timeout")
    with socket.create_connection(("127.0.0.1", broker.port), timeout=30) as slow:
        peer = "{}:{}".format(*slow.getsockname())
        first = struct.pack(">ihhih", 100, 18, 3, 1, 4)  # ApiVersions v3, 100 bytes
        slow.sendall(first if detected else first[:5])
        started = time.monotonic()
        closed = False
        while time.monotonic() - started < 8:
            try:
                slow.sendall(b"\x00")  # one byte a second: each resets the idle timer
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            slow.settimeout(1.0)
            try:
                closed = slow.recv(1) == b""
            except ConnectionResetError:
                closed = True
            except TimeoutError:
                pass
            if closed:
                break
        elapsed = time.monotonic() - started
    with connect(broker) as other:
        assert other.call(ApiVersionsRequest()).broker_id == 0
    assert closed_connections(broker, "request_timeout") == timed_out_before + 1
    lines = closing_lines(broker, peer)
    assert closed and 1.5 < elapsed < 5, elapsed
    assert any(peer in line and "socket.request.timeout.ms=2000" in line for line in lines), lines
