"""The broker's own CPU per small request, without the kernel's share: prints, asserts nothing.

``bench/broker.py`` (e) measures whole requests through a socket, where loopback TCP costs the
broker as much as everything it does itself, and the machine's noise moves the figure by a
third. This starts a real broker in process, opens a connection on its listener's protocol
detector over a transport that only counts writes, and feeds it the sweep's frames (a
single-record produce at acks=1, or a fetch that finds nothing new), four a read: what is left
is odradek's Python and the segment's write. Thread CPU per request, best of ``--rounds``.
The idempotent produce is the same produce from one idempotent producer (what Kafka clients
send by default), each request at its next sequence: its frames are made before each round.
The acks=all produce waits, after each read, until its four answers are out (their fsync, on
the flusher's thread, is not counted; the event loop's share of waiting for it is), and sends
at most DURABLE_REQUESTS a round: each read costs a flush.

Usage: ``python bench/request_in_process.py [--requests N] [--rounds N] [--kinds K,...]``;
run it from each checkout in turn to compare two versions.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parent))
from broker import MB, create_topic, sweep_empty_fetch_frame, sweep_produce_frame  # noqa: E402
from connection_layer import CountingTransport  # noqa: E402

from odradek.config.broker_config import BrokerConfig  # noqa: E402
from odradek.protocol.values.produce import Acks
from odradek.record.record_batch import set_producer_state  # noqa: E402
from odradek.record.record_batch_builder import build_batch  # noqa: E402
from odradek.server.broker import Broker  # noqa: E402

REQUESTS_PER_READ = 4
KINDS = ("produce", "idempotent produce", "acks=all produce", "fetch")
DURABLE_REQUESTS = 4000
"""The most acks=all requests sent a round (a flush each read: seconds a thousand)."""
PRODUCER_ID = 1000


class HandingOverTransport(CountingTransport):
    """Takes the connection the protocol detector hands the transport to; refuses to pause
    once measuring starts (a pause means a request took the general path and waits)."""

    def __init__(self) -> None:
        super().__init__()
        self.protocol: asyncio.BufferedProtocol | None = None
        self.measuring = False

    def set_protocol(self, protocol: asyncio.BaseProtocol) -> None:
        self.protocol = protocol  # type: ignore[assignment]

    def pause_reading(self) -> None:
        if self.measuring:
            raise RuntimeError("reading paused: requests were not answered at once")


def feed(transport: HandingOverTransport, protocol: asyncio.BufferedProtocol, data: bytes) -> None:
    """``data`` into ``protocol`` as reads of at most its buffer's size, into the connection
    the transport was handed to as soon as that happens."""
    view = memoryview(data)
    while view:
        protocol = transport.protocol or protocol
        buffer = protocol.get_buffer(len(view))
        count = min(len(buffer), len(view))
        if not count:
            raise RuntimeError(f"{type(protocol).__name__} takes no more bytes")
        buffer[:count] = view[:count]
        protocol.buffer_updated(count)
        view = view[count:]


class IdempotentReads:
    """Reads of REQUESTS_PER_READ produce frames, each carrying the producer's next batch: the
    frame's batch at the next sequence (and its CRC written again)."""

    def __init__(self, frame: bytes, batch: bytes) -> None:
        self.frame = bytearray(frame)
        self.position = frame.index(batch)
        self.sequence = 0

    def next_frames(self, count: int) -> bytes:
        frames = bytearray()
        for _ in range(count):
            set_producer_state(self.frame, self.position, PRODUCER_ID, 0, self.sequence)
            self.sequence += 1
            frames += self.frame
        return bytes(frames)

    def reads(self, requests: int) -> list[bytes]:
        return [self.next_frames(REQUESTS_PER_READ) for _ in range(requests // REQUESTS_PER_READ)]


async def measure(protocol_name: str, kind: str, requests: int, rounds: int) -> float:
    with tempfile.TemporaryDirectory(prefix="odradek-in-process-") as root:
        broker = Broker(BrokerConfig(log_dirs=(root,), port=0, metrics_port=0))
        await broker.start()
        try:
            loop = asyncio.get_running_loop()
            configs = {"segment.bytes": str(1024 * MB)}
            await loop.run_in_executor(None, lambda: create_topic(broker.port, "t", **configs))
            if kind == "fetch":
                frame = sweep_empty_fetch_frame(protocol_name, "t")
            else:
                producer = {"producer_id": PRODUCER_ID, "producer_epoch": 0, "base_sequence": 0}
                batch = build_batch(
                    [(int(time.time() * 1000), None, b"v" * 100, ())],
                    **(producer if kind == "idempotent produce" else {}),
                )
                acks = Acks.ALL if kind == "acks=all produce" else Acks.LEADER
                frame = sweep_produce_frame(protocol_name, "t", batch, acks)
            idempotent = IdempotentReads(frame, batch) if kind == "idempotent produce" else None
            if idempotent is not None:
                frame = idempotent.next_frames(1)  # (registers the producer)
            transport = HandingOverTransport()
            detector = broker._socket_server._new_connection(broker.config.endpoints()[0], None)
            detector.connection_made(transport)
            feed(
                transport, detector, frame
            )  # the first frame: the detector hands the transport over
            await asyncio.sleep(0.2)
            durable = kind == "acks=all produce"
            if durable:
                requests = min(requests, DURABLE_REQUESTS)
            connection = transport.protocol
            assert connection is not None, "the detector kept the connection"
            read = frame * REQUESTS_PER_READ
            transport.measuring = True
            best = float("inf")
            for _ in range(rounds):
                if idempotent is not None:
                    reads = idempotent.reads(requests)
                else:
                    reads = [read] * (requests // REQUESTS_PER_READ)
                started = time.thread_time()
                for read in reads:
                    feed(transport, connection, read)
                    if durable:  # until the answers are out (their task, or their turn)
                        while connection._tasks:
                            await asyncio.wait(set(connection._tasks))
                best = min(best, (time.thread_time() - started) / requests * 1e6)
                await asyncio.sleep(0.05)  # background work runs between rounds
            transport.measuring = False
            return best
        finally:
            await broker.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument(
        "--kinds", default=",".join(KINDS), help=f"comma-separated, of: {', '.join(KINDS)}"
    )
    args = parser.parse_args()
    kinds = args.kinds.split(",")
    if not set(kinds) <= set(KINDS):
        parser.error(f"--kinds: of {', '.join(KINDS)}")
    print(f"odradek from {Path.cwd()}; thread CPU us per request, best of {args.rounds}")
    for kind in kinds:
        for protocol_name in ("kafka", "msgpack"):
            figure = uvloop.run(measure(protocol_name, kind, args.requests, args.rounds))
            print(f"  {protocol_name:<8} {kind:<18} {figure:6.2f} us")


if __name__ == "__main__":
    main()
