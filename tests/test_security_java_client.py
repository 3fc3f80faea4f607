"""Kafka's Java client (tests/java/kafka-harness) over SASL_SSL with SCRAM-SHA-512 and with
PLAIN, and over mutual TLS: the admin client creates and lists topics, a producer writes and a
consumer reads back, each with nothing but Kafka's own client settings; a wrong password is
refused. Each harness call is one JVM, slow to start on a shared machine: the calls are few."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka_reference import JavaClient, ProducedRecord, ProducerRun, harness_classpath
from security_helpers import PASSWORD, USER, address, secure_broker
from server_helpers import RunningBroker

pytestmark = [pytest.mark.reference_kafka, pytest.mark.slow]

PATIENT = {"default.api.timeout.ms": "120000", "request.timeout.ms": "60000"}
"""The shared machine can be slow: a JVM's first TLS handshakes and topic creations."""
LOGIN_MODULES = {
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
}


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[RunningBroker, Path]]:
    with secure_broker(tmp_path_factory.mktemp("java-security")) as running:
        yield running


def _sasl_ssl(certs: Path, mechanism: str, password: str = PASSWORD) -> dict[str, str]:
    return {
        **PATIENT,
        "security.protocol": "SASL_SSL",
        "sasl.mechanism": mechanism,
        "sasl.jaas.config": f'{LOGIN_MODULES[mechanism]} required username="{USER}" '
        f'password="{password}";',
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs / "ca.pem"),
    }


def _mutual_tls(certs: Path) -> dict[str, str]:
    return {
        **PATIENT,
        "security.protocol": "SSL",
        "ssl.truststore.type": "PEM",
        "ssl.truststore.location": str(certs / "ca.pem"),
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(certs / "client.pem"),
    }


@pytest.mark.parametrize("security", ["SCRAM-SHA-512", "PLAIN", "mutual-TLS"])
def test_java_client_produces_consumes_and_administers(
    secure: tuple[RunningBroker, Path], security: str
) -> None:
    broker, certs = secure
    if security == "mutual-TLS":
        java = JavaClient(harness_classpath(), address(broker, "SSL"), _mutual_tls(certs))
    else:
        properties = _sasl_ssl(certs, security)
        java = JavaClient(harness_classpath(), address(broker, "SASL_SSL"), properties)
    topic = f"java-{security.lower()}"
    if security == "SCRAM-SHA-512":  # the Admin client once (each JVM is slow to start)
        created, listed, cluster = java.admin(
            ("create-topic", topic, "1"), ("list-topics",), ("describe-cluster",)
        )
        assert created == {"step": "create-topic", "topic": topic}
        assert topic in listed["topics"]
        assert cluster["nodes"][0]["port"] == broker.broker.listener_ports["SASL_SSL"]
    values = [b"record %d over %s" % (n, security.encode()) for n in range(20)]
    records = [ProducedRecord(b"k%d" % n, value) for n, value in enumerate(values)]
    (stored,) = java.produce(ProducerRun(topic, [records], {"enable.idempotence": "false"}))
    assert [r.offset for r in stored] == list(range(20))  # auto-created: one partition
    consumed = java.consume(topic)[topic]
    assert [r.value for r in consumed] == values


def test_java_client_with_a_wrong_password_is_refused(secure: tuple[RunningBroker, Path]) -> None:
    broker, certs = secure
    properties = {
        **_sasl_ssl(certs, "SCRAM-SHA-512", password="wrong"),
        "default.api.timeout.ms": "10000",
        "request.timeout.ms": "5000",
    }
    java = JavaClient(harness_classpath(), address(broker, "SASL_SSL"), properties)
    (answer,) = java.admin(("list-topics",))
    assert "SaslAuthenticationException" in answer.get("error", ""), answer
