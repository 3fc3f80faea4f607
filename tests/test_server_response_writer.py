"""ResponseWriter: responses ready together leave in one write, in order."""

from __future__ import annotations

import asyncio
from concurrent.futures import ThreadPoolExecutor

from odradek.network.response_writer import ResponseWriter
from odradek.server.metrics.broker_metrics import BrokerMetrics


class RecordingTransport:
    """Records each call that hands bytes to the socket."""

    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closing = False

    def write(self, data: bytes) -> None:
        self.writes.append(bytes(data))

    def writelines(self, parts: list[bytes]) -> None:
        self.writes.append(b"".join(bytes(part) for part in parts))

    def is_closing(self) -> bool:
        return self.closing

    def get_extra_info(self, name: str, default: object = None) -> object:
        return default


def writer_on(transport: RecordingTransport) -> tuple[ResponseWriter, BrokerMetrics]:
    metrics = BrokerMetrics()
    executor = ThreadPoolExecutor(1)
    return ResponseWriter(transport, "peer", executor, metrics, lambda: None), metrics


def bytes_out(metrics: BrokerMetrics) -> float:
    return metrics.registry.get_sample_value("odradek_network_bytes_out_total")


def test_frames_written_while_held_leave_in_one_write_in_order() -> None:
    async def main() -> None:
        transport = RecordingTransport()
        writer, metrics = writer_on(transport)
        writer.hold()
        writer.write([b"one"])
        writer.write([b"two-", b"parts"])
        writer.write([b"three"])
        assert transport.writes == []
        writer.release()
        assert transport.writes == [b"onetwo-partsthree"]
        assert bytes_out(metrics) == len(b"onetwo-partsthree")
        writer.write([b"four"])  # not held: at once
        assert transport.writes[-1] == b"four"

    asyncio.run(main())


def test_nothing_held_is_written_once_the_transport_closes() -> None:
    async def main() -> None:
        transport = RecordingTransport()
        writer, _ = writer_on(transport)
        writer.hold()
        writer.write([b"late"])
        transport.closing = True
        writer.release()
        assert transport.writes == []

    asyncio.run(main())
