"""Kafka Connect with odradek as its cluster: a distributed worker of the Kafka distribution keeps
its config, offset and status topics on odradek, runs Kafka's FileStreamSource and
FileStreamSink connectors through its REST API, and survives a SIGKILL of the broker and of the
worker with what those connectors promise (at least once: every line arrives; a line may arrive
twice only when the sink re-delivers what it had not committed) and with its connectors and
their offsets still there after the restart."""

from __future__ import annotations

import collections
import time
from pathlib import Path

import pytest

from tests.connect_helpers import ConnectWorker, connect_classpath, topic_configs, wait_for
from tests.serve_process import ServeProcess

pytestmark = [pytest.mark.reference_kafka, pytest.mark.slow]

# Short timeouts, so a killed worker's or consumer's membership ends in seconds (Kafka's
# defaults are 10 s, 45 s and a 5-minute delay before a lost worker's tasks are reassigned).
FAST_WORKER = {
    "session.timeout.ms": "6000",
    "heartbeat.interval.ms": "1000",
    "rebalance.timeout.ms": "10000",
    "scheduled.rebalance.max.delay.ms": "0",
    "consumer.session.timeout.ms": "6000",
    "consumer.heartbeat.interval.ms": "1000",
    "consumer.max.poll.interval.ms": "10000",
}
INTERNAL_TOPICS = ("connect-configs", "connect-offsets", "connect-status")


def append_lines(path: Path, first: int, count: int) -> None:
    with open(path, "a") as file:
        file.writelines(f"line-{number:05d}\n" for number in range(first, first + count))


def sink_lines(path: Path) -> list[str]:
    try:
        return path.read_text().splitlines()
    except FileNotFoundError:
        return []


def wait_for_lines(path: Path, count: int, what: str, timeout: float = 90) -> None:
    wait_for(
        f"{count} distinct lines in the sink {what}",
        lambda: len(set(sink_lines(path))) >= count,
        timeout,
    )


def test_file_stream_connectors_survive_sigkill_of_broker_and_worker(tmp_path: Path) -> None:
    classpath = connect_classpath()
    source, sink = tmp_path / "source.txt", tmp_path / "sink.txt"
    source.touch()
    broker = ServeProcess(tmp_path / "odradek")
    ports = (broker.port, broker.metrics_port)
    worker = None
    try:
        worker = ConnectWorker(classpath, tmp_path / "worker", broker.bootstrap, FAST_WORKER)
        worker.put_connector(
            "lines-in",
            {
                "connector.class": "org.apache.kafka.connect.file.FileStreamSourceConnector",
                "file": str(source),
                "topic": "lines",
                "tasks.max": "1",
            },
        )
        worker.put_connector(
            "lines-out",
            {
                "connector.class": "org.apache.kafka.connect.file.FileStreamSinkConnector",
                "file": str(sink),
                "topics": "lines",
                "tasks.max": "1",
            },
        )
        worker.wait_running("lines-in", "lines-out")
        append_lines(source, 0, 500)
        wait_for_lines(sink, 500, "before any kill")

        # The worker created its topics on odradek, compacted as Connect requires.
        configs = topic_configs(broker.bootstrap, *INTERNAL_TOPICS)
        policies = {topic: configs[topic]["cleanup.policy"] for topic in INTERNAL_TOPICS}
        assert policies == dict.fromkeys(INTERNAL_TOPICS, "compact")

        # The broker dies with no warning while lines keep coming; it comes back where it was.
        append_lines(source, 500, 500)
        broker.stop(9)
        append_lines(source, 1000, 500)
        time.sleep(1)
        broker = ServeProcess(tmp_path / "odradek", ports=ports)
        wait_for_lines(sink, 1500, "after the broker's SIGKILL")

        # The worker dies with no warning; lines written meanwhile are read when it is back.
        worker.kill()
        append_lines(source, 1500, 500)
        worker = ConnectWorker(classpath, tmp_path / "worker", broker.bootstrap, FAST_WORKER)
        # Its connectors come back from the config topic: nobody submits them again. (Its REST
        # answers before it has joined its group and read the config topic: an empty list
        # until then.)
        listed = wait_for(
            "the restarted worker to list its connectors from the config topic",
            lambda: sorted(worker.request("GET", "/connectors")),
            timeout=90,
        )
        assert listed == ["lines-in", "lines-out"]
        worker.wait_running("lines-in", "lines-out")
        wait_for_lines(sink, 2000, "after the worker's SIGKILL")

        # The source task resumed from its offset in the offset topic, not from the start.
        def source_position() -> int | None:
            offsets = worker.request("GET", "/connectors/lines-in/offsets")["offsets"]
            return offsets[0]["offset"]["position"] if offsets else None

        wait_for(
            "the source's offset at the end of its file",
            lambda: source_position() == source.stat().st_size,
            30,
        )
    finally:
        if worker is not None:
            worker.stop()
        broker.stop()

    lines = sink_lines(sink)
    expected = source.read_text().splitlines()
    assert set(lines) == set(expected), "a line was lost or invented"
    duplicates = sum(count - 1 for count in collections.Counter(lines).values())
    print(f"{len(expected)} lines in, {len(lines)} out: {duplicates} duplicates (at least once)")
    # Where the sink re-delivered from an earlier offset: each run of consecutive lines.
    position = {line: number for number, line in enumerate(expected)}
    runs, start = [], 0
    for index in range(1, len(lines) + 1):
        if index == len(lines) or position[lines[index]] != position[lines[index - 1]] + 1:
            runs.append(f"{lines[start]}..{lines[index - 1]}")
            start = index
    print("runs of lines in the sink file:", ", ".join(runs))
    # Each sink partition is one ordered log: every line's first delivery is in file order.
    first_seen = list(dict.fromkeys(lines))
    assert first_seen == expected
