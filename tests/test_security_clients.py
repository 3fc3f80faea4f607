"""Kafka's clients over every security protocol of odradek's listeners: confluent-kafka,
kafka-python, aiokafka and kcat over SASL_SSL with SCRAM-SHA-512 and with PLAIN, and over
mutual TLS; bad credentials, untrusted certificates and the wrong protocol on a port are
refused clearly and nothing is served."""

from __future__ import annotations

import asyncio
import os
import shutil
import ssl
import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import aiokafka
import aiokafka.admin
import confluent_kafka
import confluent_kafka.admin
import kafka
import pytest
from security_helpers import (
    ADMIN,
    ADMIN_PASSWORD,
    PASSWORD,
    USER,
    address,
    confluent_config,
    make_certificates,
    make_expired_client_certificate,
    secure_broker,
)
from server_helpers import RunningBroker

KCAT = shutil.which("kcat")
SENDFILE = 'odradek_fetch_bytes_total{path="sendfile"}'
COPIED = 'odradek_fetch_bytes_total{path="copied"}'


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> tuple[RunningBroker, Path]:
    with secure_broker(tmp_path_factory.mktemp("secure")) as running:
        yield running


def produce_consume_admin(config: dict[str, str], topic: str) -> list[bytes]:
    """Create ``topic``, produce three records to it and read them back, with librdkafka."""
    admin = confluent_kafka.admin.AdminClient(config)
    new = confluent_kafka.admin.NewTopic(topic, 1, replication_factor=1)
    admin.create_topics([new])[topic].result(timeout=30)
    assert topic in admin.list_topics(timeout=10).topics
    producer = confluent_kafka.Producer(config)
    for i in range(3):
        producer.produce(topic, f"{topic}-{i}".encode())
    assert producer.flush(30) == 0
    consumer = confluent_kafka.Consumer({**config, "group.id": "g", "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    values: list[bytes] = []
    deadline = time.monotonic() + 30
    while len(values) < 3 and time.monotonic() < deadline:
        message = consumer.poll(0.2)
        if message is not None and not message.error():
            values.append(message.value())
    consumer.close()
    return values


@pytest.mark.parametrize(
    ("listener", "mechanism", "client_certificate"),
    [
        ("SASL_SSL", "SCRAM-SHA-512", False),
        ("SASL_SSL", "PLAIN", False),
        ("SASL_SSL", "SCRAM-SHA-256", False),
        ("SASL_PLAINTEXT", "SCRAM-SHA-512", False),
        ("SSL", None, True),
    ],
)
def test_confluent_kafka_produces_consumes_and_administers(
    secure: tuple[RunningBroker, Path],
    listener: str,
    mechanism: str | None,
    client_certificate: bool,
) -> None:
    broker, certs = secure
    config = confluent_config(
        broker, listener, certs, mechanism or "PLAIN", client_certificate=client_certificate
    )
    topic = f"confluent-{listener}-{mechanism or 'mtls'}".lower()
    assert produce_consume_admin(config, topic) == [f"{topic}-{i}".encode() for i in range(3)]


def _kafka_python_config(broker: RunningBroker, certs: Path, mechanism: str) -> dict:
    return {
        "bootstrap_servers": address(broker, "SASL_SSL"),
        "security_protocol": "SASL_SSL",
        "sasl_mechanism": mechanism,
        "sasl_plain_username": USER,
        "sasl_plain_password": PASSWORD,
        "ssl_cafile": str(certs / "ca.pem"),
    }


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_kafka_python_over_sasl_ssl(secure: tuple[RunningBroker, Path], mechanism: str) -> None:
    broker, certs = secure
    config = _kafka_python_config(broker, certs, mechanism)
    topic = f"kafka-python-{mechanism}".lower()
    admin = kafka.KafkaAdminClient(**config)
    admin.create_topics([kafka.admin.NewTopic(topic, 1, 1)])
    assert topic in admin.list_topics()
    admin.close()
    producer = kafka.KafkaProducer(**config, enable_idempotence=False)  # not served yet
    for i in range(3):
        producer.send(topic, f"{i}".encode()).get(timeout=30)
    producer.close()
    consumer = kafka.KafkaConsumer(**config, consumer_timeout_ms=10000)
    consumer.assign([kafka.TopicPartition(topic, 0)])
    consumer.seek_to_beginning()
    values = []
    for message in consumer:
        values.append(message.value)
        if len(values) == 3:
            break
    consumer.close()
    assert values == [b"0", b"1", b"2"]


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_aiokafka_over_sasl_ssl(secure: tuple[RunningBroker, Path], mechanism: str) -> None:
    broker, certs = secure
    topic = f"aiokafka-{mechanism}".lower()

    async def run() -> list[bytes]:
        context = ssl.create_default_context(cafile=str(certs / "ca.pem"))
        config = {
            "bootstrap_servers": address(broker, "SASL_SSL"),
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": mechanism,
            "sasl_plain_username": USER,
            "sasl_plain_password": PASSWORD,
            "ssl_context": context,
        }
        admin = aiokafka.admin.AIOKafkaAdminClient(**config)
        await admin.start()
        await admin.create_topics([aiokafka.admin.NewTopic(topic, 1, 1)])
        await admin.close()
        producer = aiokafka.AIOKafkaProducer(**config)
        await producer.start()
        for i in range(3):
            await producer.send_and_wait(topic, f"{i}".encode())
        await producer.stop()
        consumer = aiokafka.AIOKafkaConsumer(**config, auto_offset_reset="earliest")
        await consumer.start()
        consumer.assign([aiokafka.TopicPartition(topic, 0)])
        await consumer.seek_to_beginning()
        values = []
        async with asyncio.timeout(30):
            while len(values) < 3:
                batch = await consumer.getmany(timeout_ms=1000)
                values += [m.value for messages in batch.values() for m in messages]
        await consumer.stop()
        return values

    assert asyncio.run(run()) == [b"0", b"1", b"2"]


@pytest.mark.parametrize("mechanism", ["SCRAM-SHA-512", "PLAIN"])
def test_kcat_over_sasl_ssl(secure: tuple[RunningBroker, Path], mechanism: str) -> None:
    if KCAT is None:
        if os.environ.get("CI") == "true":
            pytest.fail("CI installs kcat (.ci/run)")
        pytest.skip("kcat is not installed")
    broker, certs = secure
    topic = f"kcat-{mechanism}".lower()
    options = [
        "-b", address(broker, "SASL_SSL"),
        "-X", "security.protocol=SASL_SSL",
        "-X", f"sasl.mechanism={mechanism}",
        "-X", f"sasl.username={USER}",
        "-X", f"sasl.password={PASSWORD}",
        "-X", f"ssl.ca.location={certs / 'ca.pem'}",
    ]  # fmt: skip
    produced = subprocess.run(
        [KCAT, *options, "-P", "-t", topic, "-K", ":"],
        input="a:1\nb:2\n",
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert produced.returncode == 0, produced.stderr
    consumed = subprocess.run(
        [KCAT, *options, "-C", "-t", topic, "-o", "beginning", "-e", "-f", "%k %s\n"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert consumed.stdout.splitlines() == ["a 1", "b 2"], consumed.stderr


def _errors_logged(config: dict[str, str], until: Callable[[list[str]], bool] = bool) -> list[str]:
    """Error events librdkafka reports while trying to get metadata with ``config``, from its
    first attempt until ``until`` holds for them (it would retry until its timeout), and then
    it still gets no metadata."""
    errors: list[str] = []
    admin = confluent_kafka.admin.AdminClient(
        {**config, "error_cb": lambda error: errors.append(str(error))}
    )
    deadline = time.monotonic() + 30
    while not until(errors) and time.monotonic() < deadline:
        admin.poll(0.05)  # delivers the error events
    with pytest.raises(confluent_kafka.KafkaException):
        admin.list_topics(timeout=1)
    admin.poll(0)
    return errors


def _authentication_failed(errors: list[str]) -> bool:
    return any("Authentication failed" in e and "invalid credentials" in e for e in errors)


def _await_metric_above(broker: RunningBroker, name: str, before: dict[str, float]) -> None:
    """Until the broker's ``name`` counts more than in ``before`` (a close is counted a
    moment after the client saw it)."""
    deadline = time.monotonic() + 60
    while broker.metrics().get(name, 0) <= before.get(name, 0):
        assert time.monotonic() < deadline, f"{name} stayed at {before.get(name, 0)}"
        time.sleep(0.05)


@pytest.mark.parametrize(
    ("mechanism", "user", "password"),
    [
        ("SCRAM-SHA-512", USER, "wrong"),
        ("SCRAM-SHA-512", "nobody", PASSWORD),
        ("PLAIN", USER, "wrong"),
        ("PLAIN", "nobody", PASSWORD),
    ],
)
def test_bad_credentials_are_refused_with_sasl_authentication_failed(
    secure: tuple[RunningBroker, Path], mechanism: str, user: str, password: str
) -> None:
    broker, certs = secure
    before = broker.metrics()
    config = confluent_config(broker, "SASL_SSL", certs, mechanism, user, password)
    errors = _errors_logged(config, until=_authentication_failed)
    assert _authentication_failed(errors), errors
    closed = 'odradek_closed_connections_total{reason="authentication_failed"}'
    _await_metric_above(broker, closed, before)
    after = broker.metrics()
    # Nothing but the SASL exchange was served on those connections.
    assert _requests(after, "Metadata") == _requests(before, "Metadata")


def _requests(metrics: dict[str, float], api: str) -> float:
    """Requests of ``api`` served (answered without error)."""
    return metrics.get(f'odradek_requests_total{{api="{api}",error="NONE",protocol="kafka"}}', 0)


def test_an_untrusted_client_certificate_is_refused(
    secure: tuple[RunningBroker, Path], tmp_path: Path
) -> None:
    broker, certs = secure
    other = make_certificates(tmp_path / "other-ca")
    config = confluent_config(broker, "SSL", certs)
    config["ssl.certificate.location"] = str(other / "client.crt")
    config["ssl.key.location"] = str(other / "client.key")
    before = broker.metrics()
    assert _errors_logged(config)
    assert _requests(broker.metrics(), "ApiVersions") == _requests(before, "ApiVersions")


def test_an_expired_client_certificate_is_refused(secure: tuple[RunningBroker, Path]) -> None:
    broker, certs = secure
    certificate, key = make_expired_client_certificate(certs)
    config = confluent_config(broker, "SSL", certs)
    config["ssl.certificate.location"] = str(certificate)
    config["ssl.key.location"] = str(key)
    before = broker.metrics()
    assert _errors_logged(config)
    assert _requests(broker.metrics(), "ApiVersions") == _requests(before, "ApiVersions")


def test_a_broker_requiring_client_certificates_refuses_a_client_without_one(
    secure: tuple[RunningBroker, Path], tmp_path: Path
) -> None:
    shutil.copytree(secure[1], tmp_path / "certs")  # the same CA: no new keys to generate
    with secure_broker(tmp_path, client_auth="required") as (broker, certs):
        errors = _errors_logged(confluent_config(broker, "SSL", certs))
        assert errors, "a client without a certificate was served"
        config = confluent_config(broker, "SSL", certs, client_certificate=True)
        assert produce_consume_admin(config, "mtls") == [b"mtls-0", b"mtls-1", b"mtls-2"]


def test_the_wrong_protocol_on_a_port_is_refused(secure: tuple[RunningBroker, Path]) -> None:
    broker, certs = secure
    before = broker.metrics()
    # A plaintext client on a TLS port: the broker's TLS handshake fails, nothing is served.
    plaintext_on_tls = {"bootstrap.servers": address(broker, "SSL")}
    assert _errors_logged(plaintext_on_tls)
    # A TLS client on a plaintext port: its ClientHello is refused as neither protocol.
    tls_on_plaintext = {
        "bootstrap.servers": address(broker, "PLAINTEXT"),
        "security.protocol": "SSL",
        "ssl.ca.location": str(certs / "ca.pem"),
    }
    assert _errors_logged(tls_on_plaintext)
    # A client that does not speak SASL on a SASL port is closed at its first data request.
    plaintext_on_sasl = {"bootstrap.servers": address(broker, "SASL_PLAINTEXT")}
    assert _errors_logged(plaintext_on_sasl)
    closed = 'odradek_closed_connections_total{reason="unauthenticated"}'
    _await_metric_above(broker, closed, before)
    assert _requests(broker.metrics(), "Metadata") == _requests(before, "Metadata")


def test_tls_fetches_never_call_sendfile(
    secure: tuple[RunningBroker, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Sendfile into a TLS stream would send the file's bytes unencrypted: TLS fetches of
    megabytes make not a single os.sendfile call, while the plaintext port uses it. (The
    module's broker runs in this process, so the counting os.sendfile is the one it calls.)"""
    broker, certs = secure
    before = broker.metrics()
    calls = []
    real_sendfile = os.sendfile

    def counting_sendfile(*args: int) -> int:
        calls.append(args)
        return real_sendfile(*args)

    monkeypatch.setattr(os, "sendfile", counting_sendfile)
    value = os.urandom(64 * 1024)
    for listener in ("SASL_SSL", "SSL"):
        config = confluent_config(broker, listener, certs, client_certificate=True)
        producer = confluent_kafka.Producer(config)
        for _ in range(32):
            producer.produce("big", value)
        assert producer.flush(30) == 0
        consumer = confluent_kafka.Consumer(
            {**config, "group.id": "g", "enable.auto.commit": False}
        )
        consumer.assign([confluent_kafka.TopicPartition("big", 0, 0)])
        received = 0
        deadline = time.monotonic() + 30
        while received < 32 and time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is not None and not message.error():
                assert message.value() == value
                received += 1
        consumer.close()
        assert received == 32
    metrics = broker.metrics()
    assert calls == [] and metrics.get(SENDFILE, 0) == before.get(SENDFILE, 0)
    assert metrics[COPIED] - before.get(COPIED, 0) >= 2 * 32 * 64 * 1024
    # The plaintext listener of the same broker does use sendfile.
    plain = {"bootstrap.servers": address(broker, "PLAINTEXT")}
    consumer = confluent_kafka.Consumer({**plain, "group.id": "g", "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition("big", 0, 0)])
    deadline = time.monotonic() + 30
    sent_before = before.get(SENDFILE, 0)
    while broker.metrics().get(SENDFILE, 0) == sent_before and time.monotonic() < deadline:
        consumer.poll(0.2)
    consumer.close()
    assert calls and broker.metrics()[SENDFILE] > sent_before


def test_scram_credentials_made_with_kafka_admin_api_log_in(
    secure: tuple[RunningBroker, Path],
) -> None:
    broker, certs = secure
    admin_config = confluent_config(
        broker, "SASL_SSL", certs, "SCRAM-SHA-512", ADMIN, ADMIN_PASSWORD
    )
    admin = confluent_kafka.admin.AdminClient(admin_config)
    upsert = confluent_kafka.admin.UserScramCredentialUpsertion(
        "carol",
        confluent_kafka.admin.ScramCredentialInfo(
            confluent_kafka.admin.ScramMechanism.SCRAM_SHA_512, 8192
        ),
        b"carol-secret",
    )
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(timeout=30)
    described = admin.describe_user_scram_credentials(["carol"])["carol"].result(timeout=30)
    infos = described.scram_credential_infos
    assert [(i.mechanism, i.iterations) for i in infos] == [
        (confluent_kafka.admin.ScramMechanism.SCRAM_SHA_512, 8192)
    ]
    carol = confluent_config(broker, "SASL_SSL", certs, "SCRAM-SHA-512", "carol", "carol-secret")
    assert produce_consume_admin(carol, "carol-topic") == [
        b"carol-topic-0",
        b"carol-topic-1",
        b"carol-topic-2",
    ]
    # PLAIN checks the same salted credential.
    carol_plain = confluent_config(broker, "SASL_SSL", certs, "PLAIN", "carol", "carol-secret")
    assert (
        "carol-topic"
        in confluent_kafka.admin.AdminClient(carol_plain).list_topics(timeout=10).topics
    )
    stored = (broker.data_dir / "__scram_credentials.json").read_text()
    assert "carol-secret" not in stored and "carol" in stored
    deletion = confluent_kafka.admin.UserScramCredentialDeletion(
        "carol", confluent_kafka.admin.ScramMechanism.SCRAM_SHA_512
    )
    for future in admin.alter_user_scram_credentials([deletion]).values():
        future.result(timeout=30)
    assert _errors_logged(carol)
