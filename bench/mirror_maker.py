"""MirrorMaker 2's replication rate from odradek to Kafka and from Kafka to Kafka, side by side:
prints figures, asserts nothing.

Three brokers on loopback: odradek (`odradek serve`), a reference Kafka as the other source
and a reference Kafka as the target of both (tools/kafka-reference, one KRaft node each, 384 MB
heaps). The same workload is written to each source (``--records`` records of ``--size``
bytes over ``--partitions`` partitions, acks=all) before MirrorMaker 2 (the dedicated driver,
384 MB heap, IdentityReplicationPolicy, one task, no checkpoints or heartbeats) starts to copy
it to the target; rounds alternate the sources, so noise from a neighbour spreads over both.

Per run: the wall time from MirrorMaker's start until every record is on the target
(JVM start, connector start-up included) and the steady rate: records/s and MB/s from the
first replicated record seen on the target to the last. Medians and [min .. max] over rounds.

Usage: python bench/mirror_maker.py [--records N] [--size BYTES] [--partitions N] [--rounds N]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import confluent_kafka  # noqa: E402

from tests.connect_helpers import (  # noqa: E402
    MIRROR_MAKER_MAIN,
    JavaProcess,
    connect_classpath,
    end_offsets,
    write_properties,
)
from tests.kafka_helpers import create_topic  # noqa: E402
from tests.kafka_reference import ReferenceBroker  # noqa: E402
from tests.serve_process import ServeProcess  # noqa: E402


def fill(bootstrap: str, topic: str, records: int, size: int, partitions: int) -> None:
    create_topic(bootstrap, topic, partitions)
    producer = confluent_kafka.Producer(
        {"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5}
    )
    value = b"x" * size
    for number in range(records):
        while True:
            try:
                producer.produce(topic, value, partition=number % partitions)
                break
            except BufferError:
                producer.poll(0.05)
    assert producer.flush(120) == 0


def mirror(
    classpath: str, source: str, target: str, topic: str, partitions: int, records: int, state: Path
) -> tuple[float, float]:
    """Wall seconds from MirrorMaker 2's start to every record on the target, and the steady
    rate (records/s from the first record seen there to the last)."""
    properties = {
        "clusters": "source, target",
        "source.bootstrap.servers": source,
        "target.bootstrap.servers": target,
        "source->target.enabled": "true",
        "source->target.topics": topic,
        "target->source.enabled": "false",
        "replication.policy.class": "org.apache.kafka.connect.mirror.IdentityReplicationPolicy",
        "emit.checkpoints.enabled": "false",
        "emit.heartbeats.enabled": "false",
        "sync.group.offsets.enabled": "false",
        "sync.topic.acls.enabled": "false",
        "refresh.topics.interval.seconds": "1",
        "tasks.max": "1",
        "replication.factor": "1",
        "offset-syncs.topic.replication.factor": "1",
        "offset.storage.replication.factor": "1",
        "status.storage.replication.factor": "1",
        "config.storage.replication.factor": "1",
    }
    config = write_properties(state / "mm2.properties", properties)
    started = time.perf_counter()
    process = JavaProcess(
        classpath, MIRROR_MAKER_MAIN, [str(config), "--clusters", "target"], state, "mm2", "384m"
    )
    first_seen: tuple[float, int] | None = None
    try:
        while True:
            if process.process.poll() is not None:
                raise RuntimeError(f"MirrorMaker 2 exited:\n{process.log_tail()}")
            try:
                copied = sum(end_offsets(target, topic, partitions))
            except confluent_kafka.KafkaException:
                copied = 0
            now = time.perf_counter()
            if copied and first_seen is None:
                first_seen = (now, copied)
            if copied >= records:
                break
            if now - started > 600:
                raise RuntimeError(f"{copied} of {records} records copied after 600 s")
            time.sleep(0.1)
    finally:
        process.stop()
    assert first_seen is not None
    steady = (records - first_seen[1]) / max(now - first_seen[0], 1e-3)
    return now - started, steady


def spread(values: list[float]) -> str:
    return f"{statistics.median(values):10.0f}  [{min(values):.0f} .. {max(values):.0f}]"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--records", type=int, default=200_000)
    parser.add_argument("--size", type=int, default=512)
    parser.add_argument("--partitions", type=int, default=4)
    parser.add_argument("--rounds", type=int, default=2)
    args = parser.parse_args()
    classpath = connect_classpath()
    with tempfile.TemporaryDirectory(prefix="mirror-maker-bench-") as scratch:
        base = Path(scratch)
        odradek = ServeProcess(base / "odradek")
        kafka_source = ReferenceBroker.start(base / "kafka-source")
        kafka_target = ReferenceBroker.start(base / "kafka-target")
        sources = {"odradek -> Kafka": odradek.bootstrap, "Kafka -> Kafka": kafka_source.bootstrap}
        walls: dict[str, list[float]] = {name: [] for name in sources}
        rates: dict[str, list[float]] = {name: [] for name in sources}
        try:
            for round_number in range(args.rounds):
                order = list(sources) if round_number % 2 == 0 else list(reversed(sources))
                for name in order:
                    topic = f"bench-{round_number}-{'odradek' if 'odradek' in name else 'kafka'}"
                    fill(sources[name], topic, args.records, args.size, args.partitions)
                    state = base / f"mm2-{topic}"
                    state.mkdir()
                    wall, rate = mirror(
                        classpath,
                        sources[name],
                        kafka_target.bootstrap,
                        topic,
                        args.partitions,
                        args.records,
                        state,
                    )
                    walls[name].append(wall)
                    rates[name].append(rate)
                    print(f"round {round_number}: {name}: {wall:.1f} s wall, {rate:.0f} records/s")
        finally:
            odradek.stop()
            kafka_source.stop()
            kafka_target.stop()
    megabytes = args.size / 1e6
    print(
        f"\nMirrorMaker 2, {args.records} records of {args.size} B over {args.partitions}"
        f" partitions, {args.rounds} rounds (median [min .. max]); a shared machine: noisy"
    )
    print(f"{'':18}{'records/s':>10}  {'':16}{'MB/s':>6}    wall s incl. start")
    for name in sources:
        mb = [rate * megabytes for rate in rates[name]]
        print(
            f"{name:18}{spread(rates[name])}  {statistics.median(mb):6.1f}"
            f"    {statistics.median(walls[name]):.1f}"
        )


if __name__ == "__main__":
    main()
