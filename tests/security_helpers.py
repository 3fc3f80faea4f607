"""Helpers for the security tests: a test CA and certificates, a broker with TLS and SASL
listeners and a SCRAM user, and Kafka client settings for each listener."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from kafka_helpers import KafkaSocket
from server_helpers import RunningBroker

from odradek.client.event_loop_thread import EventLoopThread
from odradek.config.broker_config_loader import load_broker_config
from odradek.protocol.kafka.api_versions import response_header_version
from odradek.protocol.kafka.message_codec import decode, encode_parts, request_spec, response_spec
from odradek.security.credential_store import CredentialStore
from odradek.security.scram_credential import ScramCredential
from odradek.server.broker import Broker

REPO = Path(__file__).resolve().parent.parent
USER, PASSWORD = "alice", "alice-secret"
ADMIN, ADMIN_PASSWORD = "admin", "admin-secret"
LISTENERS = (
    "PLAINTEXT://127.0.0.1:0,SSL://127.0.0.1:0,SASL_PLAINTEXT://127.0.0.1:0,SASL_SSL://127.0.0.1:0"
)


def make_certificates(directory: Path) -> Path:
    """A CA and broker and client certificates in ``directory`` (deploy/make-test-certs.sh)."""
    if not (directory / "client.pem").exists():
        subprocess.run(
            ["sh", str(REPO / "deploy" / "make-test-certs.sh"), str(directory)],
            check=True,
            capture_output=True,
        )
    return directory


EXPIRED_CA_CONFIG = """[ ca ]
default_ca = test
[ test ]
database = index.txt
new_certs_dir = .
serial = serial
default_md = sha256
policy = any
[ any ]
commonName = supplied
"""


def make_expired_client_certificate(certs: Path) -> tuple[Path, Path]:
    """A client certificate signed by ``certs``' CA that expired in 2020: (cert, key)."""
    directory = certs / "expired"
    directory.mkdir(exist_ok=True)
    (directory / "index.txt").write_text("")
    (directory / "serial").write_text("01\n")
    (directory / "ca.cnf").write_text(EXPIRED_CA_CONFIG)
    run = {"cwd": directory, "check": True, "capture_output": True}
    subprocess.run(
        ["openssl", "req", "-newkey", "rsa:2048", "-nodes", "-keyout", "expired.key",
         "-out", "expired.csr", "-subj", "/CN=expired"],
        **run,
    )  # fmt: skip
    subprocess.run(
        ["openssl", "ca", "-batch", "-config", "ca.cnf", "-cert", str(certs / "ca.pem"),
         "-keyfile", str(certs / "ca.key"), "-in", "expired.csr", "-out", "expired.crt",
         "-startdate", "20200101000000Z", "-enddate", "20200201000000Z", "-notext"],
        **run,
    )  # fmt: skip
    return directory / "expired.crt", directory / "expired.key"


def tls_settings(certs: Path, client_auth: str = "requested") -> dict[str, str]:
    return {
        "ssl.keystore.location": str(certs / "broker.pem"),
        "ssl.truststore.location": str(certs / "ca.pem"),
        "ssl.client.auth": client_auth,
    }


def add_user(data_dir: Path, user: str, password: str, iterations: int = 4096) -> None:
    store = CredentialStore(data_dir)
    for mechanism in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
        store.upsert(user, ScramCredential.from_password(mechanism, password, iterations))


@contextmanager
def secure_broker(
    tmp_path: Path, settings: Mapping[str, str] | None = None, client_auth: str = "requested"
) -> Iterator[tuple[RunningBroker, Path]]:
    """A broker with a listener of each security protocol, users alice and admin."""
    certs = make_certificates(tmp_path / "certs")
    data = tmp_path / "data"
    data.mkdir(parents=True, exist_ok=True)
    add_user(data, USER, PASSWORD)
    add_user(data, ADMIN, ADMIN_PASSWORD)
    merged = {
        "log.dirs": str(data),
        "metrics.port": "0",
        "listeners": LISTENERS,
        **tls_settings(certs, client_auth),
        **(settings or {}),
    }
    config = load_broker_config(overrides=merged)
    loop_thread = EventLoopThread(name="test-secure-broker-loop")
    broker = loop_thread.call(Broker, config)
    loop_thread.run(broker.start(), timeout=30)
    try:
        yield RunningBroker(broker, loop_thread), certs
    finally:
        loop_thread.run(broker.stop(), timeout=30)
        loop_thread.loop.call_soon_threadsafe(loop_thread.loop.stop)


def address(broker: RunningBroker, listener: str) -> str:
    return f"127.0.0.1:{broker.broker.listener_ports[listener]}"


def confluent_config(
    broker: RunningBroker,
    listener: str,
    certs: Path,
    mechanism: str = "SCRAM-SHA-512",
    user: str = USER,
    password: str = PASSWORD,
    client_certificate: bool = False,
) -> dict[str, str]:
    """librdkafka settings to reach ``listener``."""
    config = {"bootstrap.servers": address(broker, listener), "security.protocol": listener}
    if listener in ("SSL", "SASL_SSL"):
        config["ssl.ca.location"] = str(certs / "ca.pem")
    if client_certificate:
        config["ssl.certificate.location"] = str(certs / "client.crt")
        config["ssl.key.location"] = str(certs / "client.key")
    if listener.startswith("SASL"):
        config.update(
            {"sasl.mechanism": mechanism, "sasl.username": user, "sasl.password": password}
        )
    return config


def kafka_request(
    target: str, api_key: int, version: int, body: dict[str, Any], plain_token: str
) -> dict[str, Any]:
    """One Kafka-protocol request (fields by their schema names) on a new connection to the
    SASL listener at ``target``, authenticated with SASL/PLAIN ``plain_token``
    (``\\0user\\0password`` as text); its response decoded. Works against any Kafka broker."""
    kafka = KafkaSocket(target)
    try:
        handshake = _exchange(kafka, 17, 1, {"mechanism": "PLAIN"})
        assert handshake["error_code"] == 0, handshake
        authenticated = _exchange(kafka, 36, 2, {"auth_bytes": plain_token.encode()})
        assert authenticated["error_code"] == 0, authenticated
        return _exchange(kafka, api_key, version, body)
    finally:
        kafka.close()


def _exchange(kafka: KafkaSocket, api_key: int, version: int, body: dict[str, Any]) -> dict:
    spec = request_spec(api_key, version)
    payload = b"".join(bytes(part) for part in encode_parts(spec, body))
    kafka.send(api_key, version, payload, spec.flexible)
    frame = kafka.read_frame()
    offset = 4 + (1 if response_header_version(api_key, version) else 0)
    return decode(response_spec(api_key, version), memoryview(frame), offset)
