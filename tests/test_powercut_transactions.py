"""Issue 31's crash rule at every step of ending a transaction: a real ``odradek serve``
process is SIGKILLed, or loses power on the power-cut file system (tests/powercut_fs.py), at
each step of a commit and of an abort, and started again on the same data.

A librdkafka producer (tests/transaction_ending_writer_process.py) commits one transaction and
aborts another over two topics, then ends a third; the broker stops itself (SIGSTOP, the
test-only stop of odradek/server/transaction/transaction_test_stop.py) at the step under test
of that ending: before its PrepareCommit/PrepareAbort record, once that record is durable,
between the markers of its two partitions, or after both markers before its
CompleteCommit/CompleteAbort. Then the producer is killed and the broker crashes. After the
restart, with no client helping:

- the coordinator ends the transaction: commits it once its PrepareCommit was durable, aborts
  it otherwise (before the prepare record, by the transaction timeout);
- every partition's last stable offset reaches its high watermark (nothing left hanging);
- read_committed consumers, odradek's and librdkafka's, see each transaction whole or not at
  all, on both partitions (read_uncommitted still sees all three: the records outlived it);
- the transactional id starts and commits a new transaction (InitProducerId, librdkafka).
"""

from __future__ import annotations

import functools
import itertools
import json
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, KafkaError, Producer
from confluent_kafka import TopicPartition as KafkaTopicPartition
from kafka_reference import HARNESS_MAIN, harness_classpath
from process_helpers import await_dead, state
from serve_process import ServeProcess

from odradek.client import Admin, NewTopic
from odradek.client import Consumer as OdradekConsumer
from odradek.errors import CorruptRecordError
from odradek.protocol.isolation import IsolationLevel
from odradek.record.memory_records import MemoryRecords
from odradek.record.record_batch import RecordBatch
from odradek.server.transaction.transaction_log import read_key, read_value
from odradek.server.transaction.transaction_test_stop import (
    AFTER_PREPARE,
    BEFORE_COMPLETE,
    BEFORE_PREPARE,
    BETWEEN_MARKERS,
    ENV_VARIABLE,
    STEPS,
)
from odradek.topic_partition import TopicPartition
from tests.powercut_fs import PowerCutFS
from tests.powercut_helpers import mounted

pytestmark = pytest.mark.timeout(120)

WRITER = Path(__file__).parent / "transaction_ending_writer_process.py"
TOPICS = ("pc-txn-a", "pc-txn-b")  # the markers go to pc-txn-a-0 first (sorted)
PARTITIONS = tuple(TopicPartition(topic, 0) for topic in TOPICS)
TRANSACTIONAL_ID = "pc-txn"
RECORDS = 3  # a transaction's records on each partition
BEFORE = ("commit", "abort")  # the transactions ended before the one cut
TRANSACTION_TIMEOUT_MS = 2000
BROKER_SETTINGS = {
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "100",
    "transaction.state.log.num.partitions": "1",
}
DEADLINE_S = 30.0


def serve(data: Path, stop_at: str | None = None) -> ServeProcess:
    args = [arg for name, value in BROKER_SETTINGS.items() for arg in ("--set", f"{name}={value}")]
    return ServeProcess(data, *args, env={ENV_VARIABLE: stop_at or ""})


def values(number: int) -> dict[str, list[bytes]]:
    """Transaction ``number``'s records, per topic, as the writer writes them."""
    return {t: [f"{number}-{t}-{r}".encode() for r in range(RECORDS)] for t in TOPICS}


def expected(numbers: Iterator[int] | list[int]) -> dict[str, list[bytes]]:
    found: dict[str, list[bytes]] = {t: [] for t in TOPICS}
    for number in numbers:
        for topic, records in values(number).items():
            found[topic] += records
    return found


class Writer:
    """The process writing the transactions (tests/transaction_ending_writer_process.py, or
    the Java client's txn-script) and what it reported: ``ending N``, ``committed N``,
    ``aborted N``, and errors."""

    def __init__(self, client: str, bootstrap: str, endings: list[str]) -> None:
        self.lines: list[str] = []
        if client == "java":
            command = ["java", "-Xmx256m", "-cp", java_classpath(), HARNESS_MAIN,
                       "txn-script", "--bootstrap", bootstrap]  # fmt: skip
        else:
            command = [sys.executable, str(WRITER), client, bootstrap, TRANSACTIONAL_ID,
                       str(TRANSACTION_TIMEOUT_MS), str(RECORDS), ",".join(endings),
                       *TOPICS]  # fmt: skip
        self._stderr = tempfile.TemporaryFile("w+")  # (a pipe nobody reads could fill up)
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE if client == "java" else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
        )
        read = self._read
        if client == "java":
            self.process.stdin.write(java_steps(endings))
            self.process.stdin.flush()
            read = self._read_java
        self._reader = threading.Thread(target=read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.lines.append(line.strip())

    def _read_java(self) -> None:
        sent = number = 0
        for line in self.process.stdout:
            if not line.startswith("{"):
                continue
            answer = json.loads(line)
            if answer["error"]:
                self.lines.append(f"error {answer['step']}: {answer['error']}")
            elif answer["step"] == "send":
                sent += 1
                if sent == (number + 1) * len(TOPICS) * RECORDS:
                    self.lines.append(f"ending {number}")
            elif answer["step"] in ("commit", "abort"):
                ended = "committed" if answer["step"] == "commit" else "aborted"
                self.lines.append(f"{ended} {number}")
                number += 1

    def kill(self) -> str:
        """SIGKILL it; what it wrote to stderr."""
        self.process.kill()
        self.process.wait(timeout=30)
        self._reader.join(timeout=5)
        if self._stderr.closed:
            return ""
        self._stderr.seek(0)
        with self._stderr:
            return self._stderr.read()


@functools.cache
def java_classpath() -> str:
    return harness_classpath()  # skips (fails in CI) when Java is missing


def java_steps(endings: list[str]) -> str:
    """txn-script's steps for the Java client (transaction version 2): the transactions as
    the writer process writes them, each record waited for."""
    steps = [("open", "w", f"transactional.id={TRANSACTIONAL_ID}",
              f"transaction.timeout.ms={TRANSACTION_TIMEOUT_MS}")]  # fmt: skip
    for number, ending in enumerate(endings):
        steps.append(("begin", "w"))
        for topic, records in values(number).items():
            steps += [("send", "w", topic, "0", value.decode()) for value in records]
        steps.append((ending, "w"))
    return "".join("\t".join(step) + "\n" for step in steps)


def await_stopped(broker: ServeProcess, writer: Writer, step: str) -> None:
    """Wait until the writer is ending its last transaction and the broker stopped itself at
    ``step`` of that ending."""
    ending = f"ending {len(BEFORE)}"
    deadline = time.monotonic() + DEADLINE_S
    while state(broker.process.pid) != "T" or ending not in writer.lines:
        if time.monotonic() > deadline or broker.process.poll() is not None:
            stderr = writer.kill()
            pytest.fail(
                f"the broker did not stop at {step} of transaction {len(BEFORE)}; the writer "
                f"said {writer.lines}:\n{stderr}\n" + "".join(broker.lines[-40:])
            )
        time.sleep(0.01)


def on_disk(data: Path) -> tuple[tuple[int, ...], str]:
    """What the crash left on disk, read from the files (before a restart recovers them): the
    number of markers on each partition, and the transactional id's state in its last
    ``__transaction_state`` record."""

    def batches(directory: Path) -> Iterator[RecordBatch]:
        for path in sorted(directory.glob("*.log")):
            try:
                yield from MemoryRecords(path.read_bytes()).batches()
            except CorruptRecordError:
                pass  # a torn tail: recovery cuts it

    markers = tuple(
        sum(batch.is_control for batch in batches(data / f"{tp.topic}-{tp.partition}"))
        for tp in PARTITIONS
    )
    states = [
        read_value(record.value).state.state_name
        for batch in batches(data / "__transaction_state-0")
        for record in batch.records()
        if record.key is not None and read_key(record.key) == TRANSACTIONAL_ID
    ]
    return markers, states[-1]


def end_state(admin: Admin) -> tuple[str, dict[TopicPartition, tuple[int, int]]]:
    """The transactional id's state and each partition's (last stable offset, high
    watermark)."""
    description = admin.describe_transactions([TRANSACTIONAL_ID])[TRANSACTIONAL_ID]
    latest = dict.fromkeys(PARTITIONS, -1)
    stable = admin.list_offsets(latest, IsolationLevel.TXN_COMMITTED)
    high = admin.list_offsets(latest, IsolationLevel.HIGH_WATERMARK)
    return description.state, {tp: (stable[tp].offset, high[tp].offset) for tp in PARTITIONS}


def await_ended(broker: ServeProcess) -> tuple[str, dict[TopicPartition, tuple[int, int]]]:
    """The coordinator's outcome once it ended the transaction on its own and every
    partition's last stable offset reached its high watermark (else what it was at the
    deadline)."""
    admin = Admin(bootstrap_servers=broker.bootstrap)
    try:
        deadline = time.monotonic() + DEADLINE_S
        while True:
            found, offsets = end_state(admin)
            ended = found in ("CompleteCommit", "CompleteAbort")
            if ended and all(stable == high for stable, high in offsets.values()):
                return found, offsets
            if time.monotonic() > deadline:
                return found, offsets
            time.sleep(0.05)
    finally:
        admin.close()


def read_odradek(bootstrap: str, isolation_level: str) -> dict[str, list[bytes]]:
    """Every record of the topics, from the start to the end offsets, with odradek's consumer."""
    consumer = OdradekConsumer(
        bootstrap_servers=bootstrap,
        isolation_level=isolation_level,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=50,
    )
    try:
        consumer.assign(PARTITIONS)
        ends = consumer.end_offsets(PARTITIONS)
        found: dict[str, list[bytes]] = {t: [] for t in TOPICS}
        deadline = time.monotonic() + DEADLINE_S
        while any(consumer.position(tp) < ends[tp] for tp in PARTITIONS):
            assert time.monotonic() < deadline, f"{isolation_level}: ends {ends} not reached"
            for record in consumer.poll(100):
                found[record.topic].append(record.value)
        return found
    finally:
        consumer.close()


def read_librdkafka(bootstrap: str) -> dict[str, list[bytes]]:
    """Every record of the topics a read_committed librdkafka consumer is handed, from the
    start to the partition end (its last stable offset)."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "pc-txn-reader",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": "read_committed",
            "fetch.wait.max.ms": 10,
        }
    )
    consumer.assign([KafkaTopicPartition(t, 0, 0) for t in TOPICS])  # (OFFSET_BEGINNING: +0.5 s)
    found: dict[str, list[bytes]] = {t: [] for t in TOPICS}
    at_end: set[str] = set()
    deadline = time.monotonic() + DEADLINE_S
    try:
        while len(at_end) < len(TOPICS):
            assert time.monotonic() < deadline, f"no end reached: {found}"
            message = consumer.poll(0.1)
            if message is None:
                continue
            if message.error():
                assert message.error().code() == KafkaError._PARTITION_EOF, message.error()
                at_end.add(message.topic())
                continue
            at_end.discard(message.topic())
            found[message.topic()].append(message.value())
    finally:
        consumer.close()
    return found


def commit_another(bootstrap: str, number: int) -> None:
    """A new instance of the transactional id commits transaction ``number``."""
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": TRANSACTIONAL_ID,
            "transaction.timeout.ms": 10000,
        }
    )
    producer.init_transactions(DEADLINE_S)
    producer.begin_transaction()
    for topic, records in values(number).items():
        for value in records:
            producer.produce(topic, value, partition=0)
    producer.commit_transaction(DEADLINE_S)


@pytest.fixture
def data_on(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[PowerCutFS | None]:
    """The power-cut file system for a power cut; none for a SIGKILL."""
    if request.node.callspec.params["crash"] == "sigkill":
        yield None
        return
    fs = mounted(tmp_path)
    try:
        yield fs
    finally:
        fs.stop()


CLIENTS = ("librdkafka", "odradek", "java")
FAST_CASE = ("abort", BETWEEN_MARKERS, "sigkill")  # the one of the edit-and-check loop


def cases() -> list[object]:
    """Every step of a commit and of an abort, under SIGKILL and under a power cut; the three
    writers take turns, so each step is ended by each of them (5 s a case: the 48 of every
    writer with every case would take four minutes)."""
    found = []
    for index, (ending, step, crash) in enumerate(
        itertools.product(("commit", "abort"), STEPS, ("sigkill", "power-cut"))
    ):
        client = CLIENTS[index % len(CLIENTS)]
        marks = [pytest.mark.reference_kafka] if client == "java" else []
        if (ending, step, crash) != FAST_CASE:
            marks.append(pytest.mark.slow)
        found.append(pytest.param(ending, step, crash, client, marks=marks))
    return found


def kill_or_cut(broker: ServeProcess, fs: PowerCutFS | None) -> None:
    """The broker (stopped at its step) dies: the power goes, or SIGKILL."""
    try:
        if fs is not None:
            fs.cut(abandon=lambda: broker.stop(signal.SIGKILL))
        else:
            broker.stop(signal.SIGKILL)
        await_dead(broker.process.pid)
    finally:
        broker.stop(signal.SIGKILL)


def cut_while_ending(data: Path, fs: PowerCutFS | None, ending: str, step: str, client: str):
    """Start the broker, write the transactions before and end the last one (with ``client``)
    until the broker stops at ``step``; then crash it, and check the files show that step."""
    broker = serve(data, stop_at=f"{step}:{len(BEFORE) + 1}")
    try:
        admin = Admin(bootstrap_servers=broker.bootstrap)
        try:
            admin.create_topics([NewTopic(topic, 1) for topic in TOPICS])
        finally:
            admin.close()
        writer = Writer(client, broker.bootstrap, [*BEFORE, ending])
        try:
            await_stopped(broker, writer, step)
        finally:
            writer.kill()
    finally:
        kill_or_cut(broker, fs)
    # The cut came where it should: after the markers (two per partition) of the transactions
    # before, at the step of this one's.
    prepared = "PrepareCommit" if ending == "commit" else "PrepareAbort"
    assert (
        on_disk(data)
        == {
            BEFORE_PREPARE: ((2, 2), "Ongoing"),
            AFTER_PREPARE: ((2, 2), prepared),
            BETWEEN_MARKERS: ((3, 2), prepared),
            BEFORE_COMPLETE: ((3, 3), prepared),
        }[step]
    )


def check_ended(data: Path, committed: bool, where: str) -> None:
    """Start the broker again: with no client, the coordinator ends the transaction cut (a
    commit, or an abort), whole, and the transactional id goes on."""
    cut = len(BEFORE)
    broker = serve(data)
    try:
        outcome, offsets = await_ended(broker)
        assert outcome == ("CompleteCommit" if committed else "CompleteAbort"), (
            f"{where}: the coordinator left the transaction {outcome}\n"
            + "".join(broker.lines[-40:])
        )
        hanging = {str(tp): o for tp, o in offsets.items() if o[0] != o[1]}
        assert not hanging, f"{where}: LSO below the high watermark (LSO, HW): {hanging}"

        visible = expected([0, cut] if committed else [0])
        assert read_odradek(broker.bootstrap, "read_committed") == visible
        assert read_librdkafka(broker.bootstrap) == visible
        assert read_odradek(broker.bootstrap, "read_uncommitted") == expected(range(cut + 1))

        commit_another(broker.bootstrap, cut + 1)
        # (Its markers are written after the commit is answered, as in Kafka.)
        outcome, offsets = await_ended(broker)
        assert outcome == "CompleteCommit"
        assert all(stable == high for stable, high in offsets.values()), offsets
        assert read_librdkafka(broker.bootstrap) == expected(
            [0, cut, cut + 1] if committed else [0, cut + 1]
        )
    finally:
        broker.stop()


@pytest.mark.parametrize(("ending", "step", "crash", "client"), cases())
def test_a_transaction_cut_at_each_step_of_its_end_is_ended_whole_after_the_restart(
    tmp_path: Path, data_on: PowerCutFS | None, crash: str, step: str, ending: str, client: str
) -> None:
    data = (data_on.mount if data_on is not None else tmp_path) / "data"
    cut_while_ending(data, data_on, ending, step, client)
    committed = ending == "commit" and step != BEFORE_PREPARE
    check_ended(data, committed, f"{ending} cut at {step} ({crash})")


@pytest.mark.slow
@pytest.mark.parametrize(
    ("ending", "step", "again", "crash"),
    [
        ("commit", BETWEEN_MARKERS, BETWEEN_MARKERS, "power-cut"),
        ("abort", BEFORE_PREPARE, AFTER_PREPARE, "sigkill"),  # the timeout's abort cut
    ],
)
def test_a_transaction_cut_again_while_the_restart_ends_it_is_ended_whole(
    tmp_path: Path, data_on: PowerCutFS | None, ending: str, step: str, again: str, crash: str
) -> None:
    """The restart that ends the transaction is cut too, at a step of that ending (its
    markers written again, or the abort of the transaction left open); a third start ends
    it."""
    data = (data_on.mount if data_on is not None else tmp_path) / "data"
    cut_while_ending(data, data_on, ending, step, "librdkafka")
    broker = serve(data, stop_at=again)
    deadline = time.monotonic() + DEADLINE_S
    try:
        while state(broker.process.pid) != "T":
            assert time.monotonic() < deadline, "the restart did not stop at " + again
            time.sleep(0.01)
    finally:
        kill_or_cut(broker, data_on)
    committed = ending == "commit" and step != BEFORE_PREPARE
    check_ended(data, committed, f"{ending} cut at {step}, then at {again} ({crash})")
