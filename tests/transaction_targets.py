"""The two brokers issue 31's transaction tests run on, behind one face: the reference Apache
Kafka 4.4 (tools/kafka-reference) and odradek (``odradek serve``, a child process). Each test
runs the same client steps on both; its expectations are Kafka's answers, so a test passes on
Kafka first and then judges odradek.

Both run with the coordinator's timed-out-transaction check every second (Kafka's default is
10 s) and one ``__transaction_state`` partition, so a timeout test waits seconds, not minutes.
"""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition
from kafka_reference import HARNESS_MAIN, ReferenceBroker, harness_classpath
from process_helpers import await_dead
from serve_process import ServeProcess

TARGETS = ("kafka", "odradek")
# The same broker settings on both, under Kafka's names.
BROKER_SETTINGS = {
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
    "transaction.state.log.num.partitions": "1",
}


@dataclass
class Target:
    """A running broker of either kind: its address and log directory; restartable."""

    name: str
    state_dir: Path
    reference: ReferenceBroker | None = None
    odradek: ServeProcess | None = None
    data_dir: Path | None = None
    extra: dict[str, str] = field(default_factory=dict)

    @property
    def bootstrap(self) -> str:
        return self.reference.bootstrap if self.reference else self.odradek.bootstrap

    @property
    def log_dir(self) -> Path:
        return self.reference.log_dir if self.reference else self.data_dir

    @property
    def pid(self) -> int:
        if self.reference:
            return int((self.reference.state_dir / "pid").read_text())
        return self.odradek.process.pid

    def restart(self, kill: bool = False) -> None:
        """Stop the broker (SIGKILL: a crash; else a clean stop) and start it again on the
        same data and address, so its clients reconnect."""
        if self.reference:
            self.reference.restart(kill=kill)
            return
        ports = (self.odradek.port, self.odradek.metrics_port)
        code = self.odradek.stop(signal.SIGKILL if kill else signal.SIGTERM)
        self.odradek.process.stderr.close()
        if kill:
            await_dead(self.odradek.process.pid)
        else:
            assert code == 0, "".join(self.odradek.lines[-50:])
        self.odradek = _serve(self.data_dir, ports=ports, extra=self.extra)

    def stop(self) -> None:
        if self.reference:
            self.reference.stop()
        else:
            if self.odradek.process.poll() is None:
                self.odradek.stop()
            self.odradek.process.stderr.close()

    def log(self) -> str:
        """odradek's log so far (for failure messages); Kafka's is in its state directory."""
        if self.odradek:
            return "".join(self.odradek.lines[-80:])
        logs = sorted(self.state_dir.glob("*.log")) + sorted(self.state_dir.glob("logs/*"))
        return "\n".join(path.read_text(errors="replace")[-6000:] for path in logs[:2])


def _serve(data_dir: Path, ports: tuple[int, int] | None = None, extra: dict | None = None):
    settings = {**BROKER_SETTINGS, **(extra or {})}
    args = [arg for k, v in settings.items() for arg in ("--set", f"{k}={v}")]
    return ServeProcess(data_dir, *args, ports=ports)


@contextmanager
def started(name: str, state_dir: Path, **extra: str) -> Iterator[Target]:
    """Broker ``name`` ("kafka" or "odradek") on ``state_dir`` with the shared settings and
    ``extra`` (Kafka names, dots as underscores), stopped at the end."""
    settings = {key.replace("_", "."): value for key, value in extra.items()}
    if name == "kafka":
        lines = [f"{k}={v}" for k, v in {**BROKER_SETTINGS, **settings}.items()]
        target = Target(name, state_dir, reference=ReferenceBroker.start(state_dir, *lines))
    else:
        data_dir = state_dir / "data"
        data_dir.mkdir(parents=True, exist_ok=True)
        target = Target(name, state_dir, odradek=_serve(data_dir, extra=settings),
                        data_dir=data_dir, extra=settings)  # fmt: skip
    try:
        yield target
    finally:
        target.stop()


@pytest.fixture(scope="module", params=TARGETS, name="target")
def module_target(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory):
    """The module's broker, once per kind."""
    harness_classpath()  # skips (fails in CI) before a broker starts when Java is missing
    with started(request.param, tmp_path_factory.mktemp(f"txn-{request.param}")) as running:
        yield running


def script(bootstrap: str, steps: Sequence[Sequence[str]], timeout: float = 240) -> list[dict]:
    """The harness's txn-script: named producers' steps (see TransactionScript.java) in one
    JVM; one answer a step (end-offsets: one a partition)."""
    lines = "\n".join("\t".join(str(part) for part in step) for step in steps) + "\n"
    done = subprocess.run(
        ["java", "-Xmx256m", "-cp", harness_classpath(), HARNESS_MAIN, "txn-script",
         "--bootstrap", bootstrap],
        input=lines, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
    assert done.returncode == 0, f"txn-script failed:\n{done.stdout[-3000:]}{done.stderr[-4000:]}"
    return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]


def errors(answers: list[dict]) -> list[tuple[str, str, str | None]]:
    """(step, producer, exception class or None) of every step but end-offsets."""
    return [
        (a["step"], a["name"], a["error"].split(":", 1)[0] if a["error"] else None)
        for a in answers
        if a["step"] != "end-offsets"
    ]


def end_offsets(answers: list[dict]) -> list[dict[int, int]]:
    """Each end-offsets step's answer: partition -> offset, in step order."""
    found: list[dict[int, int]] = []
    previous = None
    for answer in answers:
        if answer["step"] != "end-offsets":
            previous = None
            continue
        key = (answer["topic"], answer["isolation"])
        if previous != key or answer["partition"] in found[-1]:
            found.append({})
        found[-1][answer["partition"]] = answer["offset"]
        previous = key
    return found


def read_all(
    bootstrap: str, topic: str, partitions: int, isolation: str, keyed: bool = False
) -> dict[int, list[tuple]]:
    """partition -> [(offset, value)] (``keyed``: [(key, value)]) from the start to the end
    each partition has for ``isolation`` (read_committed: its last stable offset), as
    librdkafka hands them over."""
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": "txn-reader",
            "enable.auto.commit": False,
            "enable.partition.eof": True,
            "isolation.level": isolation,
        }
    )
    consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
    found: dict[int, list[tuple[int, bytes]]] = {p: [] for p in range(partitions)}
    at_end: set[int] = set()
    deadline = time.monotonic() + 60
    try:
        while len(at_end) < partitions:
            assert time.monotonic() < deadline, f"{topic}: no end reached in 60 s: {found}"
            message = consumer.poll(0.2)
            if message is None:
                continue
            if message.error():
                assert message.error().code() == KafkaError._PARTITION_EOF, message.error()
                at_end.add(message.partition())
                continue
            at_end.discard(message.partition())
            first = message.key() if keyed else message.offset()
            found[message.partition()].append((first, message.value()))
    finally:
        consumer.close()
    return {p: records for p, records in found.items() if records}
