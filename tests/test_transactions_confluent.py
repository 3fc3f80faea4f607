"""Issue 31 with librdkafka (confluent-kafka), on the reference Kafka 4.4 and on odradek:
init_transactions / begin / produce / commit / abort read back by a read_committed consumer;
and a consume-transform-produce loop (tests/transactional_copy_process.py: a group member
reading read_committed, producing and send_offsets_to_transaction in one transaction per
poll) killed with SIGKILL at random points and started again, which must copy each input
record exactly once into the committed output.
"""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from confluent_kafka import Producer
from kafka_helpers import create_topic
from transaction_targets import Target, module_target, read_all  # noqa: F401

pytestmark = [pytest.mark.reference_kafka, pytest.mark.slow]

COPY_PROCESS = Path(__file__).parent / "transactional_copy_process.py"


def test_librdkafka_commit_and_abort_read_committed(target: Target) -> None:
    topic = "rdkafka-txn"
    create_topic(target.bootstrap, topic, partitions=2)
    producer = Producer({"bootstrap.servers": target.bootstrap, "transactional.id": "rdkafka-1"})
    producer.init_transactions(60)
    outcomes = [("commit", 5), ("abort", 3), ("commit", 2)]
    for number, (end, count) in enumerate(outcomes):
        producer.begin_transaction()
        for n in range(count):
            producer.produce(topic, f"{end}-{number}-{n}".encode(), partition=n % 2)
        if end == "commit":
            producer.commit_transaction(60)
        else:
            producer.flush(60)  # the aborted records reach the log before the marker
            producer.abort_transaction(60)

    committed = read_all(target.bootstrap, topic, 2, "read_committed")
    uncommitted = read_all(target.bootstrap, topic, 2, "read_uncommitted")

    # Kafka 4.4: each transaction's records, then a marker on each partition it wrote.
    assert committed == {
        0: [(0, b"commit-0-0"), (1, b"commit-0-2"), (2, b"commit-0-4"), (7, b"commit-2-0")],
        1: [(0, b"commit-0-1"), (1, b"commit-0-3"), (5, b"commit-2-1")],
    }
    assert uncommitted == {
        0: [(0, b"commit-0-0"), (1, b"commit-0-2"), (2, b"commit-0-4"),
            (4, b"abort-1-0"), (5, b"abort-1-2"), (7, b"commit-2-0")],
        1: [(0, b"commit-0-1"), (1, b"commit-0-3"), (3, b"abort-1-1"), (5, b"commit-2-1")],
    }  # fmt: skip


class CopyProcess:
    """transactional_copy_process.py running; its ``committed N`` lines counted as they come."""

    def __init__(self, target: Target, seed: int) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(COPY_PROCESS), target.bootstrap, "ctp-in", "ctp-out", "ctp",
             "ctp-copier", str(seed)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        self.commits = 0
        self.copied = 0
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            if line.startswith("committed "):
                self.commits += 1
                self.copied = int(line.split()[1])

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)
        self._reader.join(timeout=5)
        self.process.stdout.close()
        self.process.stderr.close()

    def failure(self) -> str:
        return self.process.stderr.read()[-3000:] if self.process.poll() is not None else ""


def test_consume_transform_produce_copies_each_record_once_across_kills(target: Target) -> None:
    inputs, kills = 400, 3
    create_topic(target.bootstrap, "ctp-in", partitions=2)
    create_topic(target.bootstrap, "ctp-out", partitions=2)
    producer = Producer({"bootstrap.servers": target.bootstrap})
    for n in range(inputs):
        producer.produce("ctp-in", b"in-%d" % n, partition=n % 2)
    assert producer.flush(60) == 0
    rng = random.Random(31)
    for round_ in range(kills):
        copier = CopyProcess(target, seed=round_)
        # Killed after a random number of its commits, a random moment into the next one.
        wanted = rng.randint(2, 8)
        deadline = time.monotonic() + 90
        while copier.commits < wanted:
            assert copier.process.poll() is None, f"the copier failed:\n{copier.failure()}"
            assert time.monotonic() < deadline, f"round {round_}: {copier.commits} commits in 90 s"
            time.sleep(0.05)
        time.sleep(rng.uniform(0, 0.3))
        copier.kill()
    copier = CopyProcess(target, seed=kills)  # the last one runs until every input is copied
    deadline = time.monotonic() + 120
    while read_count(target) < inputs:
        assert copier.process.poll() is None, f"the copier failed:\n{copier.failure()}"
        assert time.monotonic() < deadline, f"{read_count(target)} of {inputs} copied in 120 s"
        time.sleep(0.5)
    copier.kill()

    committed = read_all(target.bootstrap, "ctp-out", 2, "read_committed")
    copies = [value for records in committed.values() for _, value in records]
    assert Counter(copies) == Counter(b"copy:in-%d" % n for n in range(inputs)), (
        f"{len(copies)} copies of {inputs} inputs; duplicated: "
        f"{[v for v, c in Counter(copies).items() if c > 1][:10]}"
    )
    for partition, records in committed.items():  # and in each partition's order
        assert [v for _, v in records] == [b"copy:in-%d" % n for n in range(partition, inputs, 2)]


def read_count(target: Target) -> int:
    committed = read_all(target.bootstrap, "ctp-out", 2, "read_committed")
    return sum(len(records) for records in committed.values())
