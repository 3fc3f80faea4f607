"""Apache Kafka beside odradek in tests: its jars, its broker, its tools and its Java client.

Everything goes through ``tools/kafka-reference/kafka-reference``. Kafka that cannot be resolved
(no Java or mvn, Maven Central unreachable) skips the test with the reason, except in CI
(``CI=true``), where it fails: CI must run these tests.
"""

from __future__ import annotations

import base64
import importlib.util
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import pytest
from process_helpers import await_dead

TOOL = Path(__file__).parents[1] / "tools" / "kafka-reference" / "kafka-reference"
UNRESOLVABLE = 2  # the tool's exit status when Kafka cannot be resolved
HARNESS_MAIN = "io.odradek.harness.KafkaHarness"
Headers = tuple[tuple[str, bytes | None], ...]


def unavailable(reason: str) -> None:
    """Skip the test for ``reason``, or fail it in CI, where the reference Kafka must run."""
    if os.environ.get("CI") == "true":
        pytest.fail(f"the reference Kafka is needed in CI: {reason}")
    pytest.skip(f"the reference Kafka is unavailable: {reason}")


def tool(*args: str, timeout: float = 900) -> str:
    """Run the tool; its stdout. Skips (fails in CI) when Kafka cannot be resolved."""
    try:
        done = subprocess.run([str(TOOL), *args], capture_output=True, text=True, timeout=timeout)
    except FileNotFoundError as error:  # no python3 on PATH for the shebang
        unavailable(str(error))
    if done.returncode == UNRESOLVABLE:
        unavailable(done.stderr.strip())
    assert done.returncode == 0, f"kafka-reference {' '.join(args)} failed:\n{done.stderr}"
    return done.stdout


def compatibility_tool() -> ModuleType:
    """tools/kafka-compatibility/kafka_compatibility.py, the generator of
    docs/kafka-compatibility.md's tables, as a module."""
    path = TOOL.parents[1] / "kafka-compatibility" / "kafka_compatibility.py"
    spec = importlib.util.spec_from_file_location("kafka_compatibility", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def kafka_classpath() -> str:
    """The classpath of Kafka's broker and tools (resolved on first use)."""
    return tool("resolve").strip()


def harness_classpath() -> str:
    """The classpath of tests/java/kafka-harness (built on first use)."""
    return tool("harness").strip()


def run_java(
    classpath: str, main_class: str, args: Sequence[str], stdin: str = "", heap: str = "256m"
) -> subprocess.CompletedProcess[str]:
    """Run a Java main class to completion; its output (check the return code yourself)."""
    return subprocess.run(
        ["java", f"-Xmx{heap}", "-cp", classpath, main_class, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=300,
    )


@dataclass(frozen=True)
class ProducedRecord:
    """A record as a client hands it to the producer (timestamp None: the producer's clock)."""

    key: bytes | None
    value: bytes | None
    headers: Headers = ()
    timestamp: int | None = None
    partition: int | None = None


@dataclass(frozen=True)
class TopicSpec:
    """A topic to create: its name, partitions and topic-level configs (Kafka's names)."""

    name: str
    partitions: int = 1
    configs: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True)
class ProducerRun:
    """What one producer sends: ``batches`` with a flush after each (each is then one or more
    batches on disk); with ``transactions``, batch i is one transaction ended by
    ``transactions[i]``, "commit", "abort" (an abort flushes first) or "halt" (the JVM stops
    with the transaction open, as a crashed producer; last only). ``group_offsets[i]``, when
    given, is what transaction i sends with sendOffsetsToTransaction: a group and its
    offsets by (topic, partition)."""

    topic: str
    batches: Sequence[Sequence[ProducedRecord]]
    properties: dict[str, str] = field(default_factory=dict)
    transactions: Sequence[str] = ()
    group_offsets: Sequence[tuple[str, Mapping[tuple[str, int], int]] | None] = ()


@dataclass(frozen=True)
class StoredRecord:
    """A record as a broker reports or serves it."""

    partition: int
    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    headers: Headers


class JavaClient:
    """Kafka's Java client (tests/java/kafka-harness) against one bootstrap address."""

    def __init__(
        self, classpath: str, bootstrap: str, properties: dict[str, str] | None = None
    ) -> None:
        """``properties``: client settings every command's clients get (security.protocol,
        sasl.*, ssl.*)."""
        self.classpath = classpath
        self.bootstrap = bootstrap
        self.properties = dict(properties or {})

    def _run(self, command: str, args: Iterable[str], stdin: str = "") -> list[dict]:
        settings = [arg for k, v in self.properties.items() for arg in ("--property", f"{k}={v}")]
        done = run_java(
            self.classpath,
            HARNESS_MAIN,
            [command, "--bootstrap", self.bootstrap, *settings, *args],
            stdin,
        )
        assert done.returncode == 0, f"harness {command} failed:\n{done.stderr[-4000:]}"
        return [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]

    def create_topics(self, *topics: TopicSpec) -> None:
        """Create the topics (one call, one JVM); an existing topic is left as it is."""
        args = []
        for topic in topics:
            args += ["--topic", topic.name, "--partitions", str(topic.partitions)]
            for name, value in topic.configs.items():
                args += ["--config", f"{name}={value}"]
        self._run("create-topic", args)

    def produce(self, *runs: ProducerRun) -> list[list[StoredRecord]]:
        """Each run's records sent by its own producer, one after the other in one JVM; what
        the broker acknowledged for each record, in order, per run."""
        lines = []
        for run in runs:
            lines.append(
                "\t".join(["producer", run.topic, *(f"{k}={v}" for k, v in run.properties.items())])
            )
            for number, batch in enumerate(run.batches):
                if run.transactions:
                    lines.append("begin")
                lines += [_record_line(record) for record in batch]
                if number < len(run.group_offsets) and run.group_offsets[number] is not None:
                    group, offsets = run.group_offsets[number]
                    fields = [str(f) for (t, p), o in offsets.items() for f in (t, p, o)]
                    lines.append("\t".join(["offsets", group, *fields]))
                lines.append(run.transactions[number] if run.transactions else "flush")
        acks = iter(self._run("produce", [], "\n".join(lines) + "\n"))
        results = []
        for run in runs:
            sent = [record for batch in run.batches for record in batch]
            stored = []
            for record in sent:
                ack = next(acks, None)
                assert ack is not None, f"{run.topic}: acknowledgements missing"
                stored.append(
                    StoredRecord(
                        ack["partition"],
                        ack["offset"],
                        ack["timestamp"],
                        record.key,
                        record.value,
                        record.headers,
                    )
                )
            results.append(stored)
        assert next(acks, None) is None, "more acknowledgements than records"
        return results

    def consume(
        self, *topics: str, start: Sequence[str] = (), **properties: str
    ) -> dict[str, list[StoredRecord]]:
        """Every record of the topics up to their end offsets, as Kafka's consumer returns
        them (one call, one JVM), manually assigned from the beginning or from ``start``: the
        harness's options, e.g. ("--from", "5"), ("--from-timestamp", "1000"),
        ("--from-end", "true")."""
        return self.consume_positions(*topics, start=start, **properties)[1]

    def consume_positions(
        self, *topics: str, start: Sequence[str] = (), **properties: str
    ) -> tuple[dict[tuple[str, int], int], dict[str, list[StoredRecord]]]:
        """:meth:`consume`, with where the seek put each partition's consumer."""
        args = [arg for topic in topics for arg in ("--topic", topic)] + list(start)
        for name, value in properties.items():
            args += ["--property", f"{name.replace('_', '.')}={value}"]
        records: dict[str, list[StoredRecord]] = {topic: [] for topic in topics}
        positions: dict[tuple[str, int], int] = {}
        for row in self._run("consume", args):
            if "start" in row:
                positions[(row["topic"], row["partition"])] = row["start"]
                continue
            records[row["topic"]].append(
                StoredRecord(
                    row["partition"],
                    row["offset"],
                    row["timestamp"],
                    _unb64(row["key"]),
                    _unb64(row["value"]),
                    tuple((name, _unb64(value)) for name, value in row["headers"]),
                )
            )
        return positions, records

    def admin(self, *steps: Sequence[str]) -> list[dict]:
        """Kafka's Admin client runs the steps (the harness's ``admin`` command, one JVM); one
        answer a step: what the step returned, or ``{"error": ExceptionClass, "message"}``."""
        lines = ["\t".join(str(field) for field in step) for step in steps]
        answers = self._run("admin", [], "\n".join(lines) + "\n")
        assert len(answers) == len(steps), answers
        return answers

    def offsets_for_times(
        self, topics: Iterable[str], timestamps: Iterable[int]
    ) -> dict[tuple[str, int, int], tuple[int, int] | None]:
        """ListOffsets by timestamp, as Kafka's consumer asks it: for (topic, partition,
        target) the (timestamp, offset) of the first record at or after the target, or None."""
        args = [arg for topic in topics for arg in ("--topic", topic)]
        args += [arg for timestamp in timestamps for arg in ("--timestamp", str(timestamp))]
        return {
            (row["topic"], row["partition"], row["target"]): None
            if row["offset"] is None
            else (row["timestamp"], row["offset"])
            for row in self._run("offsets-for-times", args)
        }


def _b64(data: bytes | None) -> str:
    return "-" if data is None else ":" + base64.b64encode(data).decode("ascii")


def _unb64(text: str | None) -> bytes | None:
    return None if text is None else base64.b64decode(text)


def _record_line(record: ProducedRecord) -> str:
    fields = [
        "record",
        "-" if record.partition is None else str(record.partition),
        "-" if record.timestamp is None else str(record.timestamp),
        _b64(record.key),
        _b64(record.value),
    ]
    for name, value in record.headers:
        assert "\t" not in name and "\n" not in name
        fields += [name, _b64(value)]
    return "\t".join(fields)


@dataclass
class ReferenceBroker:
    """A running reference Kafka broker (one KRaft node on loopback)."""

    state_dir: Path
    bootstrap: str
    log_dir: Path
    start_seconds: float
    controller_port: int = 0
    properties: tuple[str, ...] = ()

    @classmethod
    def start(
        cls,
        state_dir: Path,
        *properties: str,
        port: int | None = None,
        controller_port: int | None = None,
    ) -> ReferenceBroker:
        """Start a broker on ``state_dir`` (formatted the first time) with the extra
        server.properties lines; on free ports, or the given ones."""
        args = ["start", "--dir", str(state_dir)]
        for line in properties:
            args += ["--property", line]
        if port is not None:
            args += ["--port", str(port)]
        if controller_port is not None:
            args += ["--controller-port", str(controller_port)]
        started = json.loads(tool(*args))
        return cls(
            state_dir,
            started["bootstrap"],
            Path(started["log_dir"]),
            started["start_seconds"],
            started["controller_port"],
            properties,
        )

    @property
    def port(self) -> int:
        return int(self.bootstrap.rsplit(":", 1)[1])

    def restart(self, kill: bool = False) -> None:
        """Stop the broker, with SIGTERM (a clean shutdown) or SIGKILL (a crash: nothing of
        Kafka's shutdown runs), and start it again on the same directory, settings and ports,
        so that its clients reconnect."""
        if kill:
            pid = int((self.state_dir / "pid").read_text())
            os.kill(pid, signal.SIGKILL)
            await_dead(pid)
        self.stop()
        again = ReferenceBroker.start(
            self.state_dir, *self.properties, port=self.port, controller_port=self.controller_port
        )
        self.start_seconds = again.start_seconds

    def stop(self) -> None:
        tool("stop", "--dir", str(self.state_dir))
