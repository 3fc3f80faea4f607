"""Records a second through odradek's own clients, 100 B records, against a real broker.

Runs ``odradek serve`` in its own process (as ``bench/broker.py`` does) and measures, in this
process and on its one event loop:

- the producer sending one record a call (``send``) and a list of records a call
  (``send_many``, 1,000 a call), acks=1, ``linger_ms=5``, ``batch_size`` 512 KB;
- the consumer reading them back (``poll``, up to 100,000 records a call).

For each: records per second of wall time, and records per CPU-second of this process (the
client's own cost; the broker runs in another process). Rounds are interleaved; with
``--rounds`` > 1 the medians and ranges are printed. Asserts nothing.

Usage: ``python bench/clients.py [--records 500000] [--rounds 3]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parent))
from broker import MB, BrokerProcess, create_topic  # noqa: E402

from odradek.client import AsyncConsumer, AsyncProducer  # noqa: E402
from odradek.topic_partition import TopicPartition  # noqa: E402

VALUE = b"v" * 100
PER_CALL = 1000


def measure(work) -> tuple[float, float]:
    """(wall seconds, CPU seconds of this process) of running the coroutine ``work``."""
    wall, cpu = time.perf_counter(), time.process_time()
    uvloop.run(work)
    return time.perf_counter() - wall, time.process_time() - cpu


async def produce(bootstrap: str, topic: str, count: int, many: bool) -> None:
    async with AsyncProducer(
        bootstrap_servers=bootstrap,
        acks="1",
        linger_ms=5,
        batch_size=512 * 1024,
        buffer_memory=256 * MB,  # room for every record: measures sending, not blocking
    ) as producer:
        await producer.send(topic, b"warm-up", partition=0)  # metadata, connection
        last = None
        if many:
            values = [VALUE] * PER_CALL
            for _ in range(count // PER_CALL):
                last = producer.send_many(topic, values, partition=0)
        else:
            for _ in range(count):
                last = producer.send(topic, VALUE, partition=0)
        await producer.flush()
        await last


async def consume(bootstrap: str, topic: str, count: int) -> None:
    tp = TopicPartition(topic, 0)
    async with AsyncConsumer(bootstrap_servers=bootstrap, max_poll_records=100_000) as consumer:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        received = 0
        while received < count:
            received += len(await consumer.poll(1000))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--records", type=int, default=500_000)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    count = args.records // PER_CALL * PER_CALL
    figures: dict[str, list[tuple[float, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="odradek-clients-") as root:
        broker = BrokerProcess(Path(root) / "data")
        try:
            for round_number in range(args.rounds):
                for many in (False, True):
                    if many and not hasattr(AsyncProducer, "send_many"):
                        continue  # a version without it, measured for comparison
                    topic = f"clients-{round_number}-{int(many)}"
                    create_topic(broker.port, topic, **{"segment.bytes": str(512 * MB)})
                    label = "send_many" if many else "send"
                    wall, cpu = measure(produce(broker.bootstrap, topic, count, many))
                    figures.setdefault(f"producer {label}", []).append((wall, cpu))
                    wall, cpu = measure(consume(broker.bootstrap, topic, count + 1))
                    figures.setdefault(f"consumer ({label} batches)", []).append((wall, cpu))
                for label, rounds in figures.items():
                    wall, cpu = rounds[-1]
                    print(
                        f"round {round_number + 1} {label}: {count / wall:,.0f} records/s, "
                        f"{count / cpu:,.0f} records per CPU-s of the client",
                        flush=True,
                    )
        finally:
            broker.stop()
    if args.rounds > 1:
        for label, rounds in figures.items():
            rates = [count / wall for wall, _ in rounds]
            per_cpu = [count / cpu for _, cpu in rounds]
            print(
                f"{label}: median {statistics.median(rates):,.0f} records/s "
                f"({min(rates):,.0f}-{max(rates):,.0f}); per CPU-s "
                f"{statistics.median(per_cpu):,.0f} ({min(per_cpu):,.0f}-{max(per_cpu):,.0f})"
            )


if __name__ == "__main__":
    main()
