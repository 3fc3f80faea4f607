"""Client quota overhead benchmark: prints figures, asserts nothing.

Produce requests (acks=1, one small batch each, one connection, one at a time) against an
in-process broker, in interleaved rounds of three modes:

- ``off``: no quota configured (the request paths' one ``enabled`` check);
- ``others``: quotas in force for other clients only (each request looks its client up);
- ``quota'd``: a producer_byte_rate for this client, too high to throttle (each request is
  counted in its sensor and handled one at a time).

Also the cost of the ``off`` check itself, timed alone. Usage:
python bench/quotas.py [--requests N] [--rounds N]
"""

from __future__ import annotations

import argparse
import socket
import statistics
import tempfile
import time
import timeit

from odradek.client.event_loop_thread import EventLoopThread
from odradek.config.broker_config_loader import load_broker_config
from odradek.protocol.frame import FrameDecoder
from odradek.protocol.header import RequestHeader
from odradek.protocol.messages import encode_request
from odradek.protocol.produce import ProduceRequest
from odradek.protocol.topics import CreatableTopic, CreateTopicsRequest
from odradek.protocol.values.produce import Acks, ProducePartitionData
from odradek.record.record_batch_builder import build_batch
from odradek.server.broker import Broker
from odradek.server.quota.client_quota_entity import PRODUCER_BYTE_RATE, ClientQuotaEntity

CLIENT_ID = "bench"
MODES = {
    "off": {},
    "others": {ClientQuotaEntity.of(client_id="someone-else"): {PRODUCER_BYTE_RATE: 1000.0}},
    "quota'd": {ClientQuotaEntity.of(client_id=CLIENT_ID): {PRODUCER_BYTE_RATE: 1e12}},
}


class Client:
    def __init__(self, port: int) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.decoder = FrameDecoder(1 << 30)
        self.frames: list = []
        self.next_id = 0

    def call(self, request: object) -> None:
        header = RequestHeader(request.api_key, 0, self.next_id, CLIENT_ID)
        self.next_id += 1
        self.sock.sendall(b"".join(bytes(p) for p in encode_request(header, request)))
        while not self.frames:
            self.frames.extend(self.decoder.feed(self.sock.recv(1 << 20)))
        self.frames.pop(0)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as data:
        config = load_broker_config(overrides={"log.dirs": data, "port": "0", "metrics.port": "0"})
        loop_thread = EventLoopThread(name="bench-broker")
        broker = loop_thread.call(Broker, config)
        loop_thread.run(broker.start(), timeout=30)
        try:
            client = Client(broker.port)
            client.call(CreateTopicsRequest((CreatableTopic("bench", 1),)))
            records = build_batch([(int(time.time() * 1000), b"k", b"v" * 100, ())] * 10)
            request = ProduceRequest((ProducePartitionData("bench", 0, records),), Acks.LEADER)
            rates: dict[str, list[float]] = {mode: [] for mode in MODES}
            for _ in range(args.rounds):
                for mode, quotas in MODES.items():
                    loop_thread.call(broker.quotas.applied, quotas)
                    started = time.perf_counter()
                    for _ in range(args.requests):
                        client.call(request)
                    rates[mode].append(args.requests / (time.perf_counter() - started))
            for mode, values in rates.items():
                print(
                    f"{mode:8} {statistics.median(values):8.0f} produce requests/s "
                    f"(median of {args.rounds}; min {min(values):.0f}, max {max(values):.0f})"
                )
            quotas = broker.quotas
            quotas.applied({})
            number = 1_000_000
            check = timeit.timeit(lambda: quotas is not None and quotas.enabled, number=number)
            empty = timeit.timeit(lambda: None, number=number)
            print(f"the off check alone: {(check - empty) * 1e9 / number:.0f} ns a request")
        finally:
            loop_thread.run(broker.stop(), timeout=30)


if __name__ == "__main__":
    main()
