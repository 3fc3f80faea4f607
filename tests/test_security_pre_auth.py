"""Before a SASL client has authenticated: only ApiVersions, SaslHandshake and SaslAuthenticate
are served; anything else, hostile frames, oversized tokens and a handshake trickled a byte at
a time close the connection without reaching a data API or growing the broker's memory."""

from __future__ import annotations

import os
import struct
import time

import pytest
from kafka_helpers import KafkaSocket
from security_helpers import PASSWORD, USER, address, secure_broker
from server_helpers import RunningBroker

AUTH_TIMEOUT_MS = 2000


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> RunningBroker:
    settings = {"sasl.server.authentication.timeout.ms": str(AUTH_TIMEOUT_MS)}
    with secure_broker(tmp_path_factory.mktemp("pre-auth"), settings) as (broker, _):
        yield broker


class SaslSocket(KafkaSocket):
    """A plain socket to the SASL_PLAINTEXT listener, speaking Kafka frames by hand."""

    def __init__(self, broker: RunningBroker) -> None:
        super().__init__(address(broker, "SASL_PLAINTEXT"))

    def handshake(self, mechanism: str, version: int = 1) -> int:
        """SaslHandshake; the error code of the answer."""
        self.send(17, version, _string(mechanism))
        frame = self.read_frame()
        return struct.unpack(">h", frame[4:6])[0]

    def authenticate(self, token: bytes) -> tuple[int, bytes]:
        """SaslAuthenticate v1; the error code and the server's token."""
        self.send(36, 1, struct.pack(">i", len(token)) + token)
        frame = self.read_frame()
        error = struct.unpack(">h", frame[4:6])[0]
        message_length = struct.unpack(">h", frame[6:8])[0]
        offset = 8 + max(0, message_length)
        token_length = struct.unpack(">i", frame[offset : offset + 4])[0]
        return error, frame[offset + 4 : offset + 4 + token_length]


def _string(text: str) -> bytes:
    return struct.pack(">h", len(text)) + text.encode()


METADATA_V1_ALL_TOPICS = struct.pack(">i", -1)
PRODUCE_V3 = (
    struct.pack(">h", -1)  # transactional id: null
    + struct.pack(">hi", 1, 1000)  # acks, timeout
    + struct.pack(">i", 1) + _string("stolen")
    + struct.pack(">i", 1) + struct.pack(">i", 0) + struct.pack(">i", 0)  # partition 0, no records
)  # fmt: skip


def _served(broker: RunningBroker, api: str) -> float:
    return broker.metrics().get(
        f'odradek_requests_total{{api="{api}",error="NONE",protocol="kafka"}}', 0
    )


def test_api_versions_is_served_and_data_apis_close_the_connection(secure: RunningBroker) -> None:
    metadata_before, produce_before = _served(secure, "Metadata"), _served(secure, "Produce")
    client = SaslSocket(secure)
    client.send(18, 0, b"")
    assert struct.unpack(">h", client.read_frame()[4:6])[0] == 0
    client.send(3, 1, METADATA_V1_ALL_TOPICS)
    assert client.is_closed_by_peer()
    client.close()

    client = SaslSocket(secure)
    assert client.handshake("PLAIN") == 0
    client.send(0, 3, PRODUCE_V3)  # after the handshake, before SaslAuthenticate
    assert client.is_closed_by_peer()
    client.close()
    assert _served(secure, "Metadata") == metadata_before
    assert _served(secure, "Produce") == produce_before
    assert not (secure.data_dir / "stolen-0").exists()


def test_plain_then_data_apis_are_served(secure: RunningBroker) -> None:
    client = SaslSocket(secure)
    assert client.handshake("PLAIN") == 0
    error, _ = client.authenticate(f"\0{USER}\0{PASSWORD}".encode())
    assert error == 0
    client.send(3, 1, METADATA_V1_ALL_TOPICS)
    assert len(client.read_frame()) > 8
    client.close()


def test_a_wrong_password_is_answered_after_a_delay_and_closed(secure: RunningBroker) -> None:
    client = SaslSocket(secure)
    assert client.handshake("PLAIN") == 0
    started = time.monotonic()
    error, _ = client.authenticate(f"\0{USER}\0wrong".encode())
    assert error == 58  # SASL_AUTHENTICATION_FAILED
    assert time.monotonic() - started >= 0.09  # connection.failed.authentication.delay.ms
    assert client.is_closed_by_peer()
    client.close()


def test_an_unknown_mechanism_is_refused_and_closed(secure: RunningBroker) -> None:
    client = SaslSocket(secure)
    assert client.handshake("GSSAPI") == 33  # UNSUPPORTED_SASL_MECHANISM
    assert client.is_closed_by_peer()
    client.close()


def test_handshake_v0_takes_bare_tokens(secure: RunningBroker) -> None:
    client = SaslSocket(secure)
    assert client.handshake("PLAIN", version=0) == 0
    token = f"\0{USER}\0{PASSWORD}".encode()
    client.sock.sendall(struct.pack(">i", len(token)) + token)
    assert client.read_frame() == b""  # PLAIN's empty answer, framed by its size
    client.send(3, 1, METADATA_V1_ALL_TOPICS)
    assert len(client.read_frame()) > 8
    client.close()


def test_a_huge_sasl_token_is_refused_before_it_is_read(secure: RunningBroker) -> None:
    client = SaslSocket(secure)
    assert client.handshake("SCRAM-SHA-512") == 0
    size = 64 * 1024 * 1024  # below socket.request.max.bytes, far above the SASL limit
    client.sock.sendall(struct.pack(">ihhih", size, 36, 1, 99, 4) + b"test")
    assert client.is_closed_by_peer(timeout=5)
    client.close()
    # Nor as the connection's first frame.
    client = SaslSocket(secure)
    client.sock.sendall(struct.pack(">ihhih", size, 36, 1, 1, 4) + b"test")
    assert client.is_closed_by_peer(timeout=5)
    client.close()


def test_random_frames_never_reach_a_data_api(secure: RunningBroker) -> None:
    before = {api: _served(secure, api) for api in ("Metadata", "Produce", "Fetch")}
    rng = os.urandom
    for index in range(40):
        client = SaslSocket(secure)
        body = rng(4 + index * 7)
        api_key = index % 70
        frame = struct.pack(">hhi", api_key, index % 13, index) + body
        try:
            client.sock.sendall(struct.pack(">i", len(frame)) + frame)
            client.is_closed_by_peer(timeout=1)
        except OSError:
            pass
        client.close()
    assert {api: _served(secure, api) for api in before} == before
    test_plain_then_data_apis_are_served(secure)  # and the broker still serves


def test_a_handshake_trickled_a_byte_a_second_is_cut_off(secure: RunningBroker) -> None:
    client = SaslSocket(secure)
    body = _string("SCRAM-SHA-512")
    header = struct.pack(">hhih", 17, 1, 1, 4) + b"test"
    data = struct.pack(">i", len(header) + len(body)) + header + body
    started = time.monotonic()
    closed = False
    for byte in data[:-1]:
        try:
            client.sock.sendall(bytes([byte]))
        except OSError:
            closed = True
            break
        if client.is_closed_by_peer(timeout=1.0):
            closed = True
            break
    assert closed
    assert time.monotonic() - started < AUTH_TIMEOUT_MS / 1000 + 3
    client.close()
