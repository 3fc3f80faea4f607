"""Issue 31's crash rule with a real client, on the reference Kafka and on odradek: the broker
is SIGKILLed at random moments while a librdkafka producer (tests/transactional_writer_process.py)
runs transactions back to back over three partitions — so the kill lands before, during or
after a transaction's prepare record and markers — and restarted on the same data. After the
last restart no partition is left with a hanging transaction (read_committed reaches the high
watermark: the LSO is not pinned) and a read_committed consumer sees each transaction all or
nothing: every transaction the client saw committed whole, every one it aborted absent.

A transaction the client never learned the end of (the writer failed in it) is not held to
that: on Kafka 4.4 with librdkafka such a transaction was read in part (its records on two
partitions left open at the old epoch, then swept into the next instance's commit); the test
names such transactions in a warning.
"""

from __future__ import annotations

import random
import re
import signal
import subprocess
import sys
import threading
import time
import warnings
from collections import defaultdict
from pathlib import Path

import pytest
from kafka_helpers import create_topic
from kafka_reference import harness_classpath, kafka_classpath, run_java
from transaction_targets import end_offsets, read_all, script, started

pytestmark = [pytest.mark.reference_kafka, pytest.mark.slow]

WRITER = Path(__file__).parent / "transactional_writer_process.py"
TOPIC, PARTITIONS, RECORDS = "crash-txn", 3, 6


class Writer:
    """The writer process and the ends of transactions it reported."""

    def __init__(self, bootstrap: str, first: int) -> None:
        self.process = subprocess.Popen(
            [sys.executable, str(WRITER), bootstrap, TOPIC, str(PARTITIONS), str(first)],
            stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        self.ends: dict[int, str] = {}
        self.begun = first - 1
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            word, number = line.split()
            if word == "begin":
                self.begun = int(number)
            else:
                self.ends[int(number)] = word

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)
        self._reader.join(timeout=5)
        self.process.stdout.close()


def batches(log_dir: Path) -> str:
    """The topic's batches as Kafka's DumpLogSegments reads them (for a failure's message):
    offsets, producer epoch, control or not, and each control record's type."""
    files = sorted(
        str(path)
        for partition in range(PARTITIONS)
        for path in (log_dir / f"{TOPIC}-{partition}").glob("*.*")
        if path.suffix in (".log", ".txnindex")
    )
    done = run_java(
        kafka_classpath(), "org.apache.kafka.tools.DumpLogSegments",
        ["--deep-iteration", "--print-data-log", "--files", ",".join(files)],
    )  # fmt: skip
    kept = re.compile(r"^(Dumping|baseOffset|\| offset|version)")
    dropped = re.compile(
        r" (partitionLeaderEpoch|deleteHorizonMs|CreateTime|crc|isvalid|magic|compresscodec"
        r"|size|position|keySize|valueSize|headerKeys|sequence|lastSequence): \S+"
    )
    return "\n".join(dropped.sub("", line) for line in done.stdout.splitlines() if kept.match(line))


@pytest.mark.parametrize("kind", ["kafka", "odradek"])
def test_broker_killed_mid_transactions_leaves_each_all_or_nothing(
    kind: str, tmp_path: Path
) -> None:
    harness_classpath()  # skips (fails in CI) when Java is missing
    rng = random.Random(31)
    ends: dict[int, str] = {}
    with started(kind, tmp_path / "broker") as target:
        create_topic(target.bootstrap, TOPIC, partitions=PARTITIONS)
        writer = Writer(target.bootstrap, 0)
        for _kill in range(2):
            deadline = time.monotonic() + 120
            wanted = len(ends) + len(writer.ends) + rng.randint(5, 15)
            while len(ends) + len(writer.ends) < wanted:
                assert time.monotonic() < deadline, "the writer made no progress in 120 s"
                if writer.process.poll() is not None:  # it failed: again, from the next one
                    writer.stop()
                    ends |= writer.ends
                    writer = Writer(target.bootstrap, writer.begun + 1)
                time.sleep(0.02)
            time.sleep(rng.uniform(0, 0.05))
            target.restart(kill=True)
            # The writer lives on through the restart, or fails and is started again.
        deadline = time.monotonic() + 120
        while len(ends) + len(writer.ends) < wanted + 5:
            assert time.monotonic() < deadline, "no progress in 120 s after the last restart"
            if writer.process.poll() is not None:
                writer.stop()
                ends |= writer.ends
                writer = Writer(target.bootstrap, writer.begun + 1)
            time.sleep(0.05)
        writer.stop()
        ends |= writer.ends
        last = writer.begun

        # A transaction the writer left open ends within its timeout (5 s), by the coordinator.
        lso = hw = None
        deadline = time.monotonic() + 60
        while lso is None or lso != hw:
            assert time.monotonic() < deadline, f"LSO {lso} still below HW {hw} after 60 s"
            steps = [
                ("end-offsets", TOPIC, level) for level in ("read_committed", "read_uncommitted")
            ]
            answers = script(target.bootstrap, steps)
            lso, hw = end_offsets(answers)
            time.sleep(1)
        seen = read_all(target.bootstrap, TOPIC, PARTITIONS, "read_committed")
        log_dir = target.log_dir

    records: dict[int, set[str]] = defaultdict(set)
    for partition_records in seen.values():
        for _, value in partition_records:
            number, record = value.decode().split("-")
            records[int(number)].add(record)
    whole = {str(n) for n in range(RECORDS)}
    partial = {n: sorted(got) for n, got in records.items() if got != whole}
    known = {n: partial[n] for n in partial if n in ends}
    assert not known, f"transactions the client ended, read in part: {known}\n{batches(log_dir)}"
    lost = [n for n, end in ends.items() if end == "committed" and n not in records]
    assert not lost, f"committed transactions missing: {lost}"
    resurrected = [n for n, end in ends.items() if end == "aborted" and n in records]
    assert not resurrected, f"aborted transactions read: {resurrected}"
    if partial:
        # A transaction the writer died in (its end never reported) can be read in part on
        # Kafka 4.4 too: its records on some partitions, never ended there, later committed
        # by the next instance's COMMIT marker (seen with librdkafka on the reference Kafka).
        warnings.warn(f"{kind}: unfinished transactions read in part: {partial}", stacklevel=1)
    assert len(ends) >= 10 and last >= max(ends), (len(ends), last)
