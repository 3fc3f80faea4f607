"""The Python cost of the connection layer both wire protocols share, per request.

``bench/broker.py`` (e) measures whole requests through a socket, where the kernel's share and
the machine's noise swamp a fraction of a microsecond. This feeds Kafka-framed requests, four a
read, straight to a Connection (frame reader, read control, request memory pool, the ending
of a request answered at once, response writer, request metrics, flow control) whose handler
only answers with a fixed frame, over a transport that counts its writes: what is left is the
layer's own Python. The bare protocol of ``bench/transport_floor.py`` is measured the same
way, as its floor. Process CPU time, best of rounds, printed; nothing asserted.

Usage: ``python bench/connection_layer.py [--baseline TREE] [--rounds N]`` (``TREE``: another
checkout with its ``.venv``, measured the same way in turns with this one).
"""

from __future__ import annotations

import argparse
import asyncio
import struct
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import uvloop

REQUESTS = 200_000
REQUESTS_PER_READ = 4
RESPONSE = [b"\x00\x00\x00\x08", bytes(8)]
RESPONSE_BYTES = b"".join(RESPONSE)
BODY = struct.pack(">hhih", 1, 12, 7, 5) + b"bench" + bytes(60)  # a Fetch v12 header and body
READ = (struct.pack(">i", len(BODY)) + BODY) * REQUESTS_PER_READ


class CountingTransport(asyncio.Transport):
    """A transport that takes every write and counts it."""

    def __init__(self) -> None:
        super().__init__()
        self.writes = 0

    def get_extra_info(self, name: str, default: object = None) -> object:
        return ("127.0.0.1", 9) if name == "peername" else default

    def set_write_buffer_limits(self, high: int | None = None, low: int | None = None) -> None:
        pass

    def write(self, data: object) -> None:
        self.writes += 1

    def writelines(self, parts: object) -> None:
        self.writes += 1

    def is_closing(self) -> bool:
        return False

    def pause_reading(self) -> None:
        pass

    def resume_reading(self) -> None:
        pass

    def abort(self) -> None:
        pass

    def close(self) -> None:
        pass


def per_request_us(protocol: asyncio.BufferedProtocol, rounds: int) -> float:
    """Best of ``rounds``: CPU microseconds per request fed to ``protocol``."""
    best = float("inf")
    for _ in range(rounds):
        started = time.process_time()
        for _ in range(REQUESTS // REQUESTS_PER_READ):
            buffer = protocol.get_buffer(-1)
            buffer[: len(READ)] = READ
            protocol.buffer_updated(len(READ))
        best = min(best, (time.process_time() - started) / REQUESTS * 1e6)
    return best


async def measure(rounds: int) -> tuple[float, float]:
    """The connection layer's cost per request, and the bare protocol's."""
    from odradek.network.connection import Connection, ConnectionSettings
    from odradek.network.kafka_frame_reader import KafkaFrameReader
    from odradek.network.request_memory_pool import RequestMemoryPool
    from odradek.server.metrics.broker_metrics import BrokerMetrics

    sys.path.insert(0, str(Path(__file__).parent))
    from transport_floor import FloorProtocol

    class Registry:
        def register(self, connection: object) -> bool:
            return True

        def unregister(self, connection: object) -> None:
            pass

    class Answering(Connection[memoryview]):
        """A handler the shape of the protocols': answered at once in the read's callback
        and ended in one call (a tree from before that ending: started eagerly)."""

        protocol_label = "kafka"

        def _dispatch(self, frame: memoryview) -> None:
            if AT_ONCE:
                self._answered_at_once(1, len(frame), RESPONSE_BYTES)
                return
            received = time.perf_counter()
            size = len(frame)
            self._start(self._handle(size, received), size, eager=True)

        async def _handle(self, size: int, received: float) -> None:
            try:
                self._writer.write(RESPONSE)
                self._start_throttle()
            finally:
                self._finished(size)
            self._record(1, 0, received)
            self._update_reading()

    AT_ONCE = hasattr(Connection, "_answered_at_once")
    pool = RequestMemoryPool(None)
    connection = Answering(
        KafkaFrameReader(100 * 1024 * 1024, pool),
        ConnectionSettings(100 * 1024 * 1024, 600_000),
        Registry(),
        BrokerMetrics(),
        ThreadPoolExecutor(1),
        pool,
        None,
        lambda api_key: "Fetch",
    )
    transport = CountingTransport()
    connection.connection_made(transport)
    layer = per_request_us(connection, rounds)
    if pool.reserved or transport.writes != rounds * REQUESTS // REQUESTS_PER_READ:
        raise RuntimeError("the connection did not answer every request and free its memory")
    floor = FloorProtocol()
    floor.connection_made(CountingTransport())
    return layer, per_request_us(floor, rounds)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", type=Path, help="another checkout, with its .venv")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--one", action="store_true", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.one:  # a measuring child: the modules of the checkout it runs in, figures out
        sys.path.insert(0, str(Path.cwd()))
        print(*uvloop.run(measure(options.rounds)))
        return
    trees = {"this tree": Path(__file__).resolve().parent.parent}
    if options.baseline is not None:
        trees = {"baseline": options.baseline.resolve(), **trees}
    print(
        f"the connection layer's Python per request ({REQUESTS_PER_READ} Kafka requests a read, "
        f"answered at once; CPU us, best of {options.rounds} x {REQUESTS:,}), in turns:"
    )
    for name, tree in [*trees.items(), *trees.items()]:
        python = tree / ".venv" / "bin" / "python"
        script = Path(__file__).resolve()
        command = [str(python), str(script), "--one", "--rounds", str(options.rounds)]
        output = subprocess.run(command, cwd=tree, capture_output=True, text=True, check=True)
        layer, floor = map(float, output.stdout.split())
        print(
            f"  {name:<10} connection layer {layer:6.3f} us | bare protocol {floor:6.3f} us | "
            f"above it {layer - floor:6.3f} us"
        )


if __name__ == "__main__":
    main()
