"""Exactly one copy after a lost acknowledgement: real producers (librdkafka, kafka-python,
Kafka's Java client, odradek's own) through a proxy that drops the connection after the broker
appended a batch and before the client read the answer; also with the broker SIGKILLed before
the retry arrives, restarted from a snapshot or from the log alone, after clean and unclean
shutdowns."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import confluent_kafka
import kafka
import pytest
from fault_proxy import FaultProxy
from serve_process import ServeProcess
from server_helpers import running_broker

from odradek.client.producer import Producer

TOPIC = "exactly-once"


def produce_confluent(bootstrap: str, values: list[bytes]) -> None:
    producer = confluent_kafka.Producer(
        {
            "bootstrap.servers": bootstrap,
            "enable.idempotence": True,
            "linger.ms": 0,
            "retry.backoff.ms": 100,
            "reconnect.backoff.ms": 100,
            "reconnect.backoff.max.ms": 500,
        }
    )
    errors = []
    for value in values:
        producer.produce(TOPIC, value=value, on_delivery=lambda e, _m: errors.append(e))
        producer.flush(60)  # one batch per value: the marked one travels alone
    assert producer.flush(60) == 0
    assert not [e for e in errors if e is not None]


def produce_kafka_python(bootstrap: str, values: list[bytes]) -> None:
    producer = kafka.KafkaProducer(
        bootstrap_servers=bootstrap, acks="all", retry_backoff_ms=100, reconnect_backoff_ms=100
    )
    for value in values:
        producer.send(TOPIC, value=value).get(timeout=60)
    producer.close(30)


def produce_odradek(bootstrap: str, values: list[bytes]) -> None:
    producer = Producer(bootstrap_servers=bootstrap, retry_backoff_ms=100, reconnect_backoff_ms=100)
    assert producer.config.idempotent
    for value in values:
        producer.send(TOPIC, value).result(timeout=60)
    producer.close(30)


JAVA_PROGRAM = Path(__file__).parent / "java" / "IdempotentProducer.java"
MAVEN_REPOSITORY = Path.home() / ".m2" / "repository"
JAVA_CLASSPATH = [
    MAVEN_REPOSITORY / "org/apache/kafka/kafka-clients/4.4.0/kafka-clients-4.4.0.jar",
    MAVEN_REPOSITORY / "org/slf4j/slf4j-api/1.7.36/slf4j-api-1.7.36.jar",
]


def produce_java(bootstrap: str, values: list[bytes]) -> None:
    """Kafka's Java client (kafka-clients 4.4.0 from the local Maven repository; .ci/run
    fetches it), idempotent and acks=all, one record at a time."""
    missing = [str(jar) for jar in JAVA_CLASSPATH if not jar.exists()]
    if shutil.which("java") is None or missing:
        reason = f"the Java client test needs java and {missing or 'kafka-clients'}"
        if os.environ.get("CI") == "true":
            pytest.fail(reason)
        pytest.skip(reason)
    classpath = os.pathsep.join(map(str, JAVA_CLASSPATH))
    command = ["java", "-cp", classpath, str(JAVA_PROGRAM), bootstrap, TOPIC]
    result = subprocess.run(
        command + [v.decode() for v in values], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr[-3000:]


PRODUCERS: dict[str, Callable[[str, list[bytes]], None]] = {
    "confluent-kafka": produce_confluent,
    "kafka-python": produce_kafka_python,
    "odradek": produce_odradek,
    "java": produce_java,
}


def stored_values(bootstrap: str) -> list[bytes]:
    """Every record of the topic's partition 0, read to its high watermark."""
    consumer = confluent_kafka.Consumer(
        {"bootstrap.servers": bootstrap, "group.id": "check", "enable.auto.commit": False}
    )
    low, high = consumer.get_watermark_offsets(confluent_kafka.TopicPartition(TOPIC, 0), 30)
    consumer.assign([confluent_kafka.TopicPartition(TOPIC, 0, low)])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(values) < high - low and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None and not message.error():
            values.append(message.value())
    consumer.close()
    return values


@pytest.fixture
def proxy() -> Iterator[FaultProxy]:
    fault_proxy = FaultProxy(target_port=0)
    yield fault_proxy
    fault_proxy.close()


def advertised(proxy: FaultProxy) -> str:
    return f"PLAINTEXT://127.0.0.1:{proxy.port}"


@pytest.mark.parametrize("client", sorted(PRODUCERS))
def test_a_lost_acknowledgement_is_retried_and_stored_once(
    tmp_path: Path, proxy: FaultProxy, client: str
) -> None:
    with running_broker(tmp_path, {"advertised.listeners": advertised(proxy)}) as broker:
        proxy.target_port = broker.port
        marker = b"lost-ack-" + client.encode()
        proxy.arm(marker)
        PRODUCERS[client](proxy.bootstrap, [b"first", marker, b"last"])
        assert proxy.drops == 1
        assert stored_values(proxy.bootstrap) == [b"first", marker, b"last"]


HISTORIES = ["snapshot after clean shutdown", "log only", "rolled"]
# Every history with odradek's producer, the richest one (a roll's snapshot plus the tail)
# with each Kafka client: a subprocess broker per case, so the suite stays short.
KILL_CASES = [("odradek", history) for history in HISTORIES] + [
    (client, "rolled") for client in sorted(PRODUCERS) if client != "odradek"
]


@pytest.mark.slow
@pytest.mark.parametrize(("client", "history"), KILL_CASES)
def test_a_broker_killed_before_the_retry_still_stores_one_copy(
    tmp_path: Path, proxy: FaultProxy, client: str, history: str
) -> None:
    """The broker appends (acks=all: fsynced), the answer is lost, the broker is SIGKILLed;
    the restarted broker rebuilds the producer state (from the snapshot the clean shutdown
    left, from the log alone, or from a roll's snapshot plus the log) and recognises the
    retry."""
    data = tmp_path / "data"
    settings = ["--set", f"advertised.listeners={advertised(proxy)}"]
    if history == "rolled":
        settings += ["--set", "log.segment.bytes=1048576"]
    broker = ServeProcess(data, *settings)
    try:
        proxy.target_port = broker.port
        # "rolled": past the smallest segment.bytes (1 MiB), so a roll writes a snapshot
        filler = [b"x" * 100_000] * (12 if history == "rolled" else 2)
        PRODUCERS[client](proxy.bootstrap, [b"warm-up", *filler])
        if history == "rolled":  # the roll's background flush writes it
            deadline = time.monotonic() + 60
            while not list((data / f"{TOPIC}-0").glob("*.snapshot")):
                assert time.monotonic() < deadline, "no snapshot written at the roll"
                time.sleep(0.05)
        if history == "snapshot after clean shutdown":
            assert broker.stop() == 0
            broker = ServeProcess(data, *settings)
            proxy.target_port = broker.port
        elif history == "log only":
            for snapshot in (data / f"{TOPIC}-0").glob("*.snapshot"):
                snapshot.unlink()
        marker = b"killed-" + client.encode()
        killed = broker

        def kill() -> None:
            killed.stop(signal.SIGKILL)

        proxy.arm(marker, on_drop=kill)
        restarted: list[ServeProcess] = []

        def restart_when_dropped() -> None:
            deadline = time.monotonic() + 30
            while proxy.drops == 0 or killed.process.poll() is None:
                assert time.monotonic() < deadline
                time.sleep(0.02)
            restarted.append(ServeProcess(data, *settings))
            proxy.target_port = restarted[0].port

        restarter = threading.Thread(target=restart_when_dropped)
        restarter.start()
        try:
            PRODUCERS[client](proxy.bootstrap, [marker, b"after"])
        finally:
            restarter.join(60)
        broker = restarted[0]
        assert proxy.drops == 1
        counts = Counter(stored_values(proxy.bootstrap))
        assert counts[marker] == 1 and counts[b"after"] == 1 and counts[b"warm-up"] == 1
    finally:
        broker.stop()
