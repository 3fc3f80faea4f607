"""odradek's own protocol and tools over TLS and SASL: the client takes Kafka's client keys,
the CLI takes them from ``--command-config``, and a msgpack connection is gated until it has
authenticated, as a Kafka one is."""

from __future__ import annotations

import socket
from pathlib import Path

import pytest
from click.testing import CliRunner
from security_helpers import PASSWORD, USER, address, secure_broker
from server_helpers import RawClient, RunningBroker, batch

from odradek.cli.main import cli
from odradek.client import Admin, Consumer, NewTopic, Producer
from odradek.errors import KafkaError, UnsupportedSaslMechanismError
from odradek.protocol.api_versions import ApiVersionsRequest
from odradek.protocol.metadata import MetadataRequest
from odradek.protocol.produce import ProduceRequest
from odradek.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest
from odradek.protocol.topics import CreatableTopic, CreateTopicsRequest
from odradek.protocol.values.produce import Acks, ProducePartitionData
from odradek.topic_partition import TopicPartition


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> tuple[RunningBroker, Path]:
    with secure_broker(tmp_path_factory.mktemp("msgpack-security")) as running:
        yield running


def _settings(broker: RunningBroker, certs: Path, listener: str, **extra: str) -> dict:
    settings = {
        "bootstrap_servers": address(broker, listener),
        "security_protocol": listener,
        "ssl_ca_location": str(certs / "ca.pem"),
    }
    if listener.startswith("SASL"):
        settings |= {"sasl_username": USER, "sasl_password": PASSWORD}
    return settings | extra


@pytest.mark.parametrize(
    ("listener", "extra"),
    [
        ("SASL_SSL", {"sasl_mechanism": "SCRAM-SHA-512"}),
        ("SASL_SSL", {"sasl_mechanism": "PLAIN"}),
        ("SASL_PLAINTEXT", {"sasl_mechanism": "SCRAM-SHA-256"}),
        ("SSL", {"ssl_certificate_location": "client.crt", "ssl_key_location": "client.key"}),
    ],
)
def test_odradek_client_produces_and_consumes(
    secure: tuple[RunningBroker, Path], listener: str, extra: dict[str, str]
) -> None:
    broker, certs = secure
    extra = {k: str(certs / v) if v.startswith("client.") else v for k, v in extra.items()}
    settings = _settings(broker, certs, listener, **extra)
    topic = f"odradek-{listener}-{extra.get('sasl_mechanism', 'mtls')}".lower()
    with Admin(**settings) as admin:
        admin.create_topics([NewTopic(topic, 1)])
    with Producer(**settings) as producer:
        futures = [producer.send(topic, f"v{i}".encode()) for i in range(3)]
    assert [f.result(timeout=30).offset for f in futures] == [0, 1, 2]
    with Consumer(**settings, auto_offset_reset="earliest") as consumer:
        consumer.assign([TopicPartition(topic, 0)])
        values: list[bytes] = []
        for _ in range(50):
            values += [r.value for r in consumer.poll(200)]
            if len(values) >= 3:
                break
    assert values == [b"v0", b"v1", b"v2"]


def test_odradek_client_reports_a_wrong_password(secure: tuple[RunningBroker, Path]) -> None:
    broker, certs = secure
    settings = _settings(broker, certs, "SASL_SSL", sasl_mechanism="SCRAM-SHA-512")
    settings["sasl_password"] = "wrong"
    with Admin(**settings, request_timeout_ms=5000) as admin:
        with pytest.raises(KafkaError, match="SASL_AUTHENTICATION_FAILED"):
            admin.metadata(None)


def test_msgpack_requests_before_authentication_close_the_connection(
    secure: tuple[RunningBroker, Path],
) -> None:
    broker, _ = secure
    host, port = address(broker, "SASL_PLAINTEXT").split(":")
    with RawClient(socket.create_connection((host, int(port)), timeout=10)) as client:
        assert client.call(ApiVersionsRequest()).broker_id == 0
        client.send(ProduceRequest((ProducePartitionData("stolen", 0, batch(1)),)))
        with pytest.raises(ConnectionError):
            client.read_frame()
    assert not (broker.data_dir / "stolen-0").exists()
    with RawClient(socket.create_connection((host, int(port)), timeout=10)) as client:
        client.call(SaslHandshakeRequest("PLAIN"))
        client.call(SaslAuthenticateRequest(f"\0{USER}\0{PASSWORD}"))
        assert client.call(MetadataRequest(None)).topics is not None
    with RawClient(socket.create_connection((host, int(port)), timeout=10)) as client:
        client.call(SaslHandshakeRequest("PLAIN"))
        client.send(SaslAuthenticateRequest(f"\0{USER}\0wrong"))
        header, _ = client.read_response(SaslAuthenticateRequest(""))
        assert header.error == 58
        with pytest.raises(ConnectionError):
            client.read_frame()


def test_a_msgpack_produce_answered_at_once_waits_for_authentication(
    secure: tuple[RunningBroker, Path],
) -> None:
    """acks=1 to one partition, the shape a connection answers from its bytes: refused (the
    connection closed, nothing appended) before authentication, answered after it."""
    broker, _ = secure
    host, port = address(broker, "SASL_PLAINTEXT").split(":")
    produce = ProduceRequest((ProducePartitionData("early", 0, batch(1)),), acks=Acks.LEADER)
    with RawClient(socket.create_connection((host, int(port)), timeout=10)) as client:
        client.call(SaslHandshakeRequest("PLAIN"))
        client.call(SaslAuthenticateRequest(f"\0{USER}\0{PASSWORD}"))
        client.call(CreateTopicsRequest((CreatableTopic("early", 1),)))
    with RawClient(socket.create_connection((host, int(port)), timeout=10)) as client:
        client.send(produce)
        with pytest.raises(ConnectionError):
            client.read_frame()
    with RawClient(socket.create_connection((host, int(port)), timeout=10)) as client:
        client.call(SaslHandshakeRequest("PLAIN"))
        client.call(SaslAuthenticateRequest(f"\0{USER}\0{PASSWORD}"))
        for expected_offset in (0, 1):
            (answer,) = client.call(produce).partitions
            assert (answer.error, answer.base_offset) == (0, expected_offset)


def test_cli_commands_take_a_command_config_file(
    secure: tuple[RunningBroker, Path], tmp_path: Path
) -> None:
    broker, certs = secure
    config = tmp_path / "client.properties"
    config.write_text(
        "security.protocol=SASL_SSL\n"
        "sasl.mechanism=SCRAM-SHA-512\n"
        f"sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
        f'username="{USER}" password="{PASSWORD}";\n'
        f"ssl.ca.location={certs / 'ca.pem'}\n"
    )
    common = ["--bootstrap", address(broker, "SASL_SSL"), "--command-config", str(config)]
    runner = CliRunner()
    created = runner.invoke(cli, ["topics", "create", "cli-secure", *common])
    assert created.exit_code == 0, created.output
    produced = runner.invoke(cli, ["produce", "cli-secure", *common], input="a\nb\n")
    assert produced.exit_code == 0, produced.output
    consumed = runner.invoke(
        cli, ["consume", "cli-secure", "--from-beginning", "--max-messages", "2", *common]
    )
    assert consumed.exit_code == 0 and consumed.output.split() == ["a", "b"], consumed.output
    listed = runner.invoke(cli, ["topics", "list", *common])
    assert "cli-secure" in listed.output
    healthy = runner.invoke(cli, ["health", *common])
    assert healthy.exit_code == 0, healthy.output
    # Without the file the same port refuses the command, with a clear error.
    refused = runner.invoke(cli, ["topics", "list", "--bootstrap", address(broker, "SASL_SSL")])
    assert refused.exit_code != 0
    config.write_text("no.such.setting=1\n")
    unknown = runner.invoke(cli, ["topics", "list", *common])
    assert unknown.exit_code != 0 and "unknown property 'no.such.setting'" in unknown.output


def test_a_mechanism_the_broker_has_not_enabled_is_named_as_such(tmp_path: Path) -> None:
    """UNSUPPORTED_SASL_MECHANISM (33) with the enabled mechanisms, as Kafka's SaslHandshake
    answers; odradek's client raises it (not a NETWORK_EXCEPTION for an unreachable server)."""
    with secure_broker(tmp_path, {"sasl.enabled.mechanisms": "PLAIN"}) as (broker, certs):
        host, port = address(broker, "SASL_PLAINTEXT").split(":")
        with RawClient(socket.create_connection((host, int(port)), timeout=10)) as client:
            client.send(SaslHandshakeRequest("SCRAM-SHA-512"))
            header, _ = client.read_response(SaslHandshakeRequest(""))
        assert header.error == UnsupportedSaslMechanismError.code
        assert "enabled: PLAIN" in header.message
        settings = _settings(broker, certs, "SASL_PLAINTEXT", sasl_mechanism="SCRAM-SHA-512")
        with Admin(**settings, request_timeout_ms=5000) as admin:
            with pytest.raises(UnsupportedSaslMechanismError, match="enabled: PLAIN"):
                admin.metadata(None)
