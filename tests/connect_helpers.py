"""Kafka Connect and MirrorMaker 2 from the Kafka distribution as real processes, for the tests
and bench that run them against odradek and the reference Kafka: a distributed Connect worker
driven through its REST API, and the dedicated MirrorMaker 2 driver.

Both run on the classpath ``tools/kafka-reference/kafka-reference connect-classpath`` resolves
(skipping, or failing in CI, when Java or Maven are missing, as every reference-Kafka test).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import confluent_kafka
import confluent_kafka.admin

from tests.kafka_reference import tool
from tests.serve_process import free_port

CONNECT_MAIN = "org.apache.kafka.connect.cli.ConnectDistributed"
MIRROR_MAKER_MAIN = "org.apache.kafka.connect.mirror.MirrorMaker"
LOG4J = """status = warn
appender.file.type = File
appender.file.name = file
appender.file.fileName = {log}
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.file.ref = file
logger.clients.name = org.apache.kafka.clients
logger.clients.level = WARN
"""


def connect_classpath() -> str:
    """Kafka Connect's and MirrorMaker 2's classpath (resolved on first use)."""
    return tool("connect-classpath").strip()


def write_properties(path: Path, properties: Mapping[str, str]) -> Path:
    path.write_text("".join(f"{name}={value}\n" for name, value in properties.items()))
    return path


def wait_for(what: str, check: Callable[[], Any], timeout: float, interval: float = 0.5) -> Any:
    """``check()``'s first truthy answer, polled until ``timeout``; fails saying ``what``."""
    deadline = time.monotonic() + timeout
    while True:
        answer = check()
        if answer:
            return answer
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(interval)


class JavaProcess:
    """A Java main class of Connect's classpath as a child process in its own session, logging
    to ``state_dir/NAME.log`` (log4j2) and ``state_dir/NAME.stdout``."""

    def __init__(
        self, classpath: str, main: str, args: list[str], state_dir: Path, name: str, heap: str
    ) -> None:
        state_dir.mkdir(parents=True, exist_ok=True)
        self.log = state_dir / f"{name}.log"
        log4j = state_dir / f"{name}-log4j2.properties"
        log4j.write_text(LOG4J.format(log=self.log))
        command = [
            "java",
            f"-Xmx{heap}",
            f"-Xms{heap}",
            "-XX:+UseSerialGC",
            "-XX:TieredStopAtLevel=1",
            "-Djava.awt.headless=true",
            f"-Dlog4j2.configurationFile={log4j}",
            "-cp",
            classpath,
            main,
            *args,
        ]
        with open(state_dir / f"{name}.stdout", "ab") as output:
            self.process = subprocess.Popen(
                command,
                stdout=output,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )

    def log_tail(self, lines: int = 40) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return ""

    def kill(self) -> None:
        """SIGKILL: no shutdown hook runs, nothing is flushed or committed."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)

    def stop(self) -> None:
        """SIGTERM, a clean shutdown; SIGKILL after 30 s."""
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.kill()


class ConnectWorker(JavaProcess):
    """A distributed Connect worker (one of group ``group_id``) on ``bootstrap``, its REST API
    on a free loopback port; ``settings`` add to or override the worker's properties."""

    def __init__(
        self,
        classpath: str,
        state_dir: Path,
        bootstrap: str,
        settings: Mapping[str, str] | None = None,
        heap: str = "320m",
        rest_port: int | None = None,
    ) -> None:
        self.rest_port = rest_port or free_port()
        properties = {
            "bootstrap.servers": bootstrap,
            "group.id": "connect-cluster",
            "key.converter": "org.apache.kafka.connect.storage.StringConverter",
            "value.converter": "org.apache.kafka.connect.storage.StringConverter",
            "config.storage.topic": "connect-configs",
            "offset.storage.topic": "connect-offsets",
            "status.storage.topic": "connect-status",
            "config.storage.replication.factor": "1",
            "offset.storage.replication.factor": "1",
            "status.storage.replication.factor": "1",
            "offset.storage.partitions": "1",
            "status.storage.partitions": "1",
            "offset.flush.interval.ms": "500",
            "listeners": f"http://127.0.0.1:{self.rest_port}",
            "plugin.discovery": "only_scan",
            **(settings or {}),
        }
        state_dir.mkdir(parents=True, exist_ok=True)
        config = write_properties(state_dir / "worker.properties", properties)
        super().__init__(classpath, CONNECT_MAIN, [str(config)], state_dir, "connect", heap)
        try:
            wait_for("the Connect worker's REST API", self._serving, 120)
        except BaseException:
            self.kill()  # a worker that did not come up is not left running
            raise

    def _serving(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"the Connect worker exited:\n{self.log_tail()}")
        try:
            return self.request("GET", "/connectors") is not None
        except (OSError, AssertionError):  # not listening yet, or 404 until Jersey is set up
            return False

    def request(self, method: str, path: str, body: object = None) -> Any:
        """The REST API's JSON answer (None for 204); HTTP errors raise with their body."""
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"http://127.0.0.1:{self.rest_port}{path}",
            data=data,
            method=method,
            headers={"Content-Type": "application/json", "Accept": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                text = response.read()
        except urllib.error.HTTPError as error:
            raise AssertionError(f"{method} {path}: {error.code} {error.read()!r}") from error
        return json.loads(text) if text else None

    def put_connector(self, name: str, config: Mapping[str, str]) -> None:
        self.request("PUT", f"/connectors/{name}/config", dict(config))

    def states(self) -> dict[str, list[str]]:
        """Each connector's state followed by its tasks' states, e.g. RUNNING, RUNNING."""
        answer = self.request("GET", "/connectors?expand=status")
        return {
            name: [entry["status"]["connector"]["state"]]
            + [task["state"] for task in entry["status"]["tasks"]]
            for name, entry in answer.items()
        }

    def wait_running(self, *names: str, timeout: float = 60) -> None:
        def running() -> bool:
            try:
                states = self.states()
            except (OSError, AssertionError):  # the REST API answers 409 while rebalancing
                return False
            return all(
                len(states.get(name, [])) > 1 and set(states[name]) == {"RUNNING"} for name in names
            )

        wait_for(f"connectors {names} running", running, timeout)


def produce(bootstrap: str, topic: str, values: list[bytes], partitions: int = 1) -> None:
    """Send ``values`` round robin over the partitions, keyed by their number; acks=all."""
    producer = confluent_kafka.Producer({"bootstrap.servers": bootstrap, "acks": "all"})
    for number, value in enumerate(values):
        producer.produce(topic, value, key=str(number).encode(), partition=number % partitions)
    assert producer.flush(60) == 0, f"{topic}: records unacknowledged"


def consume_group(
    bootstrap: str, group: str, topic: str, count: int, timeout: float = 60
) -> list[tuple[int, int, bytes]]:
    """``count`` records of ``topic`` as a member of ``group`` (from its committed offsets, else
    the earliest), committing what it read; (partition, offset, value) of each."""
    reader = confluent_kafka.Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    reader.subscribe([topic])
    read: list[tuple[int, int, bytes]] = []
    deadline = time.monotonic() + timeout
    try:
        while len(read) < count and time.monotonic() < deadline:
            message = reader.poll(0.2)
            if message is None or message.error():
                continue
            read.append((message.partition(), message.offset(), message.value()))
            if len(read) == count:
                break
        if read:
            reader.commit(asynchronous=False)
    finally:
        reader.close()
    return read


def read_partitions(
    bootstrap: str, topic: str, partitions: int, timeout: float = 60
) -> list[list[tuple[bytes | None, bytes | None]]]:
    """Each partition's records up to its end offset, in order: (key, value) of each."""
    reader = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "read-partitions", "enable.auto.commit": False}
    )
    ends = end_offsets(bootstrap, topic, partitions)
    reader.assign([confluent_kafka.TopicPartition(topic, p, 0) for p in range(partitions)])
    records: list[list[tuple[bytes | None, bytes | None]]] = [[] for _ in range(partitions)]
    deadline = time.monotonic() + timeout
    try:
        while (
            any(len(records[p]) < ends[p] for p in range(partitions))
            and time.monotonic() < deadline
        ):
            message = reader.poll(0.2)
            if message is None or message.error():
                continue
            records[message.partition()].append((message.key(), message.value()))
    finally:
        reader.close()
    return records


def topic_configs(bootstrap: str, *topics: str) -> dict[str, dict[str, str]]:
    """Each topic's configs as DescribeConfigs answers them (name to value)."""
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": bootstrap})
    resources = [
        confluent_kafka.admin.ConfigResource(confluent_kafka.admin.ResourceType.TOPIC, topic)
        for topic in topics
    ]
    answers = admin.describe_configs(resources)
    return {
        resource.name: {name: entry.value for name, entry in future.result(30).items()}
        for resource, future in answers.items()
    }


def end_offsets(bootstrap: str, topic: str, partitions: int) -> list[int]:
    reader = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": "ends"})
    try:
        return [
            reader.get_watermark_offsets(confluent_kafka.TopicPartition(topic, p), timeout=30)[1]
            for p in range(partitions)
        ]
    finally:
        reader.close()


def committed(bootstrap: str, group: str, topic: str, partitions: int) -> list[int]:
    """``group``'s committed offset of each partition (-1001 when none)."""
    reader = confluent_kafka.Consumer({"bootstrap.servers": bootstrap, "group.id": group})
    try:
        asked = [confluent_kafka.TopicPartition(topic, p) for p in range(partitions)]
        return [tp.offset for tp in reader.committed(asked, timeout=30)]
    finally:
        reader.close()
