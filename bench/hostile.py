"""Hostile-client benchmark: a well-behaved producer's latency while another client attacks.

Runs ``odradek serve`` as its own process and a well-behaved producer (acks=1, one 10-record
batch of 100 B records per request, one request at a time) as another; prints its produce
latency p50/p99 alone, then while a hostile client, from this process, keeps sending:

- decompression bombs: zstd batches of 1 GiB of zeros (~32 KiB each) and gzip batches of
  256 MiB of zeros (~250 KiB each), one after another on one connection; half of them
  crafted to hide the sizes they would decompress to, so they cost the broker a
  decompression up to its bound (max.message.bytes x message.decompression.max.ratio);
- half frames: connections announcing a 100 MiB request and sending a few bytes of it, kept
  open (reopened when the broker closes them);
- trickles: connections sending a request a byte a second.

Also prints the broker's peak RSS during the attack (sampled every 20 ms) and what the attack
got (bombs refused and how, connections closed). The target is a p99 under attack within 2x
of the p99 alone. Prints, asserts nothing; ratios are measured side by side in one run.

Usage: ``python bench/hostile.py [--seconds N] [--attack bombs,half,trickles]`` (default: 15 s
per phase, all three attacks at once).
"""

from __future__ import annotations

import argparse
import json
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from pathlib import Path

import zstandard
from broker import BrokerProcess, create_topic, frame_of, lag_p99

from odradek.errors import error_name_for
from odradek.protocol.frame import FrameDecoder
from odradek.protocol.produce import ProduceRequest, ProduceResponse
from odradek.protocol.values.produce import Acks, ProducePartitionData
from odradek.record.batch_header import BatchHeader
from odradek.record.compression import CompressionType
from odradek.record.record_batch import HEADER_SIZE, HEADER_STRUCT, LOG_OVERHEAD, write_crc
from odradek.record.record_batch_builder import build_batch

MIB = 1024 * 1024
TOPIC = "orders"
BOMB_TOPIC = "bombs"  # another partition: appends to one partition are serialised by design
HALF_FRAMES = 200
TRICKLES = 20
REQUEST_TIMEOUT_MS = 5000
BOMBS = ((CompressionType.ZSTD, 1024 * MIB), (CompressionType.GZIP, 256 * MIB))


# --- the well-behaved producer (a child process, so the attack's threads cannot slow it) -----


def well_behaved(port: int, seconds: float) -> list[float]:
    """Produce one request at a time for ``seconds``; each request's latency."""
    sock = socket.create_connection(("127.0.0.1", port))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    decoder = FrameDecoder()
    latencies = []
    deadline = time.monotonic() + seconds
    correlation_id = 0
    while time.monotonic() < deadline:
        now = int(time.time() * 1000)
        records = [(now, b"key", b"v" * 100, ())] * 10
        request = ProduceRequest(
            (ProducePartitionData(TOPIC, 0, build_batch(records)),), acks=Acks.LEADER
        )
        frame = frame_of(request, correlation_id)
        started = time.perf_counter()
        sock.sendall(frame)
        frames = []
        while not frames:
            frames = decoder.feed(sock.recv(65536))
        latencies.append(time.perf_counter() - started)
        response = ProduceResponse.from_header(frames[0].header, frames[0].payload)
        assert response.partitions[0].error == 0, response
        correlation_id += 1
        time.sleep(0.002)
    sock.close()
    return latencies


def measure(port: int, seconds: float) -> list[float]:
    """Latencies of ``well_behaved`` run in a child process."""
    command = [sys.executable, __file__, "--client", str(port), "--seconds", str(seconds)]
    output = subprocess.run(command, capture_output=True, text=True, check=True).stdout
    return sorted(json.loads(output))


def summary(latencies: list[float]) -> tuple[float, float, str]:
    p50 = latencies[len(latencies) // 2] * 1000
    p99 = latencies[int(len(latencies) * 0.99)] * 1000
    return p50, p99, f"p50 {p50:.2f} ms, p99 {p99:.2f} ms ({len(latencies)} requests)"


# --- the hostile client ----------------------------------------------------------------------


def zeros_in(codec: CompressionType, size: int, crafted: bool) -> bytes:
    """``size`` zero bytes compressed; ``crafted``: with the sizes a stream declares hidden
    (zstd: a byte in 4 KiB set, so no RLE blocks; gzip: its trailer zeroed), so the broker
    must decompress up to its bound to refuse them."""
    chunk = bytes(16 * MIB)
    if crafted and codec is CompressionType.ZSTD:
        chunk = (bytes(4095) + b"\x01") * (len(chunk) // 4096)
    if codec is CompressionType.GZIP:
        compressor = zlib.compressobj(9, zlib.DEFLATED, 31)
    else:
        compressor = zstandard.ZstdCompressor(level=3).compressobj()
    data = b"".join(compressor.compress(chunk) for _ in range(size // len(chunk)))
    data += compressor.flush()
    return data[:-4] + bytes(4) if crafted and codec is CompressionType.GZIP else data


def bomb_request(codec: CompressionType, size: int, crafted: bool) -> bytes:
    records = zeros_in(codec, size, crafted)
    now = int(time.time() * 1000)
    batch = bytearray(HEADER_SIZE + len(records))
    length = len(batch) - LOG_OVERHEAD
    header = BatchHeader(0, length, -1, 2, 0, int(codec), 0, now, now, -1, -1, -1, 1)
    HEADER_STRUCT.pack_into(batch, 0, *header)
    batch[HEADER_SIZE:] = records
    write_crc(batch, 0)
    request = ProduceRequest((ProducePartitionData(BOMB_TOPIC, 0, bytes(batch)),), acks=Acks.LEADER)
    return frame_of(request)


class Attack:
    """The hostile client's threads, and what they got."""

    def __init__(self, port: int, kinds: set[str]) -> None:
        self._port = port
        self._stop = threading.Event()
        self.bombs: dict[str, int] = {}
        self.half_frames_closed = 0
        self.trickles_closed = 0
        self._bombs = [
            (f"{codec.label}{' crafted' if crafted else ''}", bomb_request(codec, size, crafted))
            for crafted in (False, True)
            for codec, size in BOMBS
        ]
        targets = {"bombs": self._bomb, "half": self._half_frames, "trickles": self._trickles}
        self._threads = [
            threading.Thread(target=target, daemon=True)
            for kind, target in targets.items()
            if kind in kinds
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(timeout=30)

    def _connect(self) -> socket.socket:
        return socket.create_connection(("127.0.0.1", self._port), timeout=30)

    def _bomb(self) -> None:
        sock, decoder = self._connect(), FrameDecoder()
        turn = 0
        while not self._stop.is_set():
            name, frame = self._bombs[turn % len(self._bombs)]
            sock.sendall(frame)
            frames = []
            while not frames:
                frames = decoder.feed(sock.recv(65536))
            response = ProduceResponse.from_header(frames[0].header, frames[0].payload)
            key = f"{name} {error_name_for(response.partitions[0].error)}"
            self.bombs[key] = self.bombs.get(key, 0) + 1
            turn += 1
        sock.close()

    def _half_frames(self) -> None:
        body = struct.pack(">I", 4) + b"\x81\xa1a\x01"
        open_sockets: list[socket.socket] = []
        while not self._stop.is_set():
            while len(open_sockets) < HALF_FRAMES:
                sock = self._connect()
                sock.sendall(struct.pack(">I", 100 * MIB) + body + bytes(1000))
                sock.setblocking(False)
                open_sockets.append(sock)
            for sock in list(open_sockets):
                try:
                    if sock.recv(1) == b"":
                        raise ConnectionResetError
                except BlockingIOError:
                    continue
                except OSError:
                    pass
                self.half_frames_closed += 1
                open_sockets.remove(sock)
                sock.close()
            self._stop.wait(0.1)
        for sock in open_sockets:
            sock.close()

    def _trickles(self) -> None:
        socks = [self._connect() for _ in range(TRICKLES)]
        for sock in socks:
            sock.sendall(struct.pack(">I", 1000))
        while not self._stop.is_set():
            for index, sock in enumerate(socks):
                try:
                    sock.sendall(b"\x00")
                except OSError:
                    self.trickles_closed += 1
                    sock.close()
                    socks[index] = self._connect()
                    socks[index].sendall(struct.pack(">I", 1000))
            self._stop.wait(1.0)
        for sock in socks:
            sock.close()


class PeakRss:
    """The broker's largest RSS while running, sampled every 20 ms."""

    def __init__(self, broker: BrokerProcess) -> None:
        self._broker = broker
        self._stop = threading.Event()
        self.peak_mb = broker.rss_mb()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(0.02):
            self.peak_mb = max(self.peak_mb, self._broker.rss_mb())

    def stop(self) -> float:
        self._stop.set()
        self._thread.join()
        return self.peak_mb


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=15.0)
    parser.add_argument(
        "--attack",
        default="bombs,half,trickles",
        help="which attacks to run, comma-separated (default: all three)",
    )
    parser.add_argument("--client", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.client is not None:
        print(json.dumps(well_behaved(args.client, args.seconds)))
        return
    with tempfile.TemporaryDirectory() as data_dir:
        broker = BrokerProcess(
            Path(data_dir), "--set", f"socket.request.timeout.ms={REQUEST_TIMEOUT_MS}"
        )
        try:
            create_topic(broker.port, TOPIC)
            create_topic(broker.port, BOMB_TOPIC)
            measure(broker.port, 2)  # warm-up
            rss_before = broker.rss_mb()
            lag_before = broker.lag_histogram()
            _, alone_p99, alone = summary(measure(broker.port, args.seconds))
            lag_alone = lag_p99(lag_before, lag_before := broker.lag_histogram())
            print(f"well-behaved produce alone:        {alone}; loop lag p99 {lag_alone}")
            attack = Attack(broker.port, set(args.attack.split(",")))
            peak = PeakRss(broker)
            attack.start()
            time.sleep(1.0)  # let the attack build up
            lag_before = broker.lag_histogram()
            _, attacked_p99, attacked = summary(measure(broker.port, args.seconds))
            lag_attacked = lag_p99(lag_before, broker.lag_histogram())
            attack.stop()
            peak_mb = peak.stop()
            print(f"well-behaved produce under attack: {attacked}; loop lag p99 {lag_attacked}")
            print(f"p99 under attack / alone: {attacked_p99 / alone_p99:.2f}x (target <= 2x)")
            print(f"broker RSS: {rss_before:.0f} MB before, peak {peak_mb:.0f} MB under attack")
            print(f"bombs: {attack.bombs}")
            print(
                f"closed by socket.request.timeout.ms={REQUEST_TIMEOUT_MS}: "
                f"{attack.half_frames_closed} half frames ({HALF_FRAMES} kept open at a time), "
                f"{attack.trickles_closed} trickles ({TRICKLES} at a time)"
            )
            time.sleep(2.0)
            print(f"broker RSS 2 s after the attack: {broker.rss_mb():.0f} MB")
        finally:
            broker.stop()


if __name__ == "__main__":
    main()
