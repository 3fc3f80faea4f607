"""Authorization with StandardAuthorizer's semantics, through Kafka's clients and odradek's own
protocol: a principal without ACLs is refused on every API, PREFIXED and LITERAL ALLOWs open
what they name, a DENY wins, hosts must match, super users pass, Metadata lists only what a
principal may describe, ACLs persist, and each refusal is audit-logged."""

from __future__ import annotations

import logging
import socket
import time
from pathlib import Path

import confluent_kafka
import confluent_kafka.admin as kadmin
import pytest
from security_helpers import ADMIN, ADMIN_PASSWORD, USER, confluent_config, secure_broker
from server_helpers import RawClient, RunningBroker, batch

from odradek.protocol.metadata import MetadataRequest
from odradek.protocol.produce import ProduceRequest
from odradek.protocol.values.produce import ProducePartitionData
from odradek.security.acl import AclOperation, PatternType, PermissionType, ResourceType
from odradek.security.acl_store import AclStore
from odradek.server.authorization.authorizer import Authorizer

TOPIC_AUTHORIZATION_FAILED = 29
AUTHORIZER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": f"User:{ADMIN};User:CN=client,OU=clients,O=odradek test",
}


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> tuple[RunningBroker, Path]:
    with secure_broker(tmp_path_factory.mktemp("acls"), AUTHORIZER) as running:
        admin = kadmin.AdminClient(_admin(*running))
        topics = [kadmin.NewTopic(name, 1, 1) for name in ("secret", "alice-data", "alice-no-read")]
        for future in admin.create_topics(topics).values():
            future.result(timeout=30)
        yield running


def _admin(broker: RunningBroker, certs: Path) -> dict[str, str]:
    return confluent_config(broker, "SASL_SSL", certs, "SCRAM-SHA-512", ADMIN, ADMIN_PASSWORD)


def _alice(broker: RunningBroker, certs: Path) -> dict[str, str]:
    return confluent_config(broker, "SASL_SSL", certs, "SCRAM-SHA-512")


def _acl(
    name: str,
    operation: kadmin.AclOperation,
    pattern: kadmin.ResourcePatternType = kadmin.ResourcePatternType.LITERAL,
    permission: kadmin.AclPermissionType = kadmin.AclPermissionType.ALLOW,
    principal: str = f"User:{USER}",
    host: str = "*",
) -> kadmin.AclBinding:
    return kadmin.AclBinding(
        kadmin.ResourceType.TOPIC, name, pattern, principal, host, operation, permission
    )


def _create_acls(broker: RunningBroker, certs: Path, bindings: list[kadmin.AclBinding]) -> None:
    admin = kadmin.AdminClient(_admin(broker, certs))
    for future in admin.create_acls(bindings).values():
        future.result(timeout=30)


def _produce_error(config: dict[str, str], topic: str) -> confluent_kafka.KafkaError | None:
    """The delivery error of one record to ``topic`` (None: delivered)."""
    outcome: list[confluent_kafka.KafkaError | None] = []
    producer = confluent_kafka.Producer(
        {**config, "message.timeout.ms": 10000, "retries": 0, "enable.idempotence": False}
    )
    producer.produce(topic, b"v", on_delivery=lambda error, _message: outcome.append(error))
    producer.flush(15)
    return outcome[0] if outcome else None


def _fetch_error(config: dict[str, str], topic: str) -> confluent_kafka.KafkaError | None:
    """The first error consuming ``topic`` from offset 0 (None: a record arrived)."""
    consumer = confluent_kafka.Consumer({**config, "group.id": "g", "enable.auto.commit": False})
    consumer.assign([confluent_kafka.TopicPartition(topic, 0, 0)])
    deadline = time.monotonic() + 15
    try:
        while time.monotonic() < deadline:
            message = consumer.poll(0.2)
            if message is None:
                continue
            return message.error()
    finally:
        consumer.close()
    raise AssertionError(f"neither a record nor an error from {topic}")


def test_a_principal_without_acls_is_refused(
    secure: tuple[RunningBroker, Path], caplog: pytest.LogCaptureFixture
) -> None:
    broker, certs = secure
    alice = _alice(broker, certs)
    caplog.set_level(logging.WARNING, logger="odradek.audit")
    error = _produce_error(alice, "secret")
    assert (
        error is not None and error.code() == confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED
    )
    admin = kadmin.AdminClient(alice)
    assert "secret" not in admin.list_topics(timeout=10).topics  # Metadata filtering
    with pytest.raises(confluent_kafka.KafkaException, match="AUTHORIZATION"):
        admin.create_topics([kadmin.NewTopic("alice-new", 1, 1)])["alice-new"].result(timeout=30)
    with pytest.raises(confluent_kafka.KafkaException, match="AUTHORIZATION"):
        admin.delete_topics(["secret"])["secret"].result(timeout=30)
    resource = kadmin.ConfigResource(kadmin.ResourceType.TOPIC, "secret")
    with pytest.raises(confluent_kafka.KafkaException, match="AUTHORIZATION"):
        admin.describe_configs([resource])[resource].result(timeout=30)
    broker_resource = kadmin.ConfigResource(kadmin.ResourceType.BROKER, "0")
    with pytest.raises(confluent_kafka.KafkaException, match="AUTHORIZATION"):
        admin.describe_configs([broker_resource])[broker_resource].result(timeout=30)
    with pytest.raises(confluent_kafka.KafkaException, match="AUTHORIZATION"):
        admin.create_acls([_acl("secret", kadmin.AclOperation.ALL)])[
            _acl("secret", kadmin.AclOperation.ALL)
        ].result(timeout=30)
    audit = [r.getMessage() for r in caplog.records if r.name == "odradek.audit"]
    assert any(
        f"principal=User:{USER} operation=Describe resource=Topic:secret peer=127.0.0.1:" in line
        for line in audit
    ), audit


def test_prefixed_allows_and_a_deny_wins(secure: tuple[RunningBroker, Path]) -> None:
    broker, certs = secure
    op, prefixed = kadmin.AclOperation, kadmin.ResourcePatternType.PREFIXED
    _create_acls(
        broker,
        certs,
        [
            _acl("alice-", op.WRITE, prefixed),
            _acl("alice-", op.READ, prefixed),
            _acl("alice-no-read", op.READ, permission=kadmin.AclPermissionType.DENY),
            # The consumer's group (it looks up its coordinator even when only assigned).
            kadmin.AclBinding(
                kadmin.ResourceType.GROUP,
                "g",
                kadmin.ResourcePatternType.LITERAL,
                f"User:{USER}",
                "*",
                op.READ,
                kadmin.AclPermissionType.ALLOW,
            ),
        ],
    )
    alice = _alice(broker, certs)
    assert _produce_error(alice, "alice-data") is None
    assert _fetch_error(alice, "alice-data") is None
    assert _produce_error(alice, "alice-no-read") is None
    denied = _fetch_error(alice, "alice-no-read")
    assert (
        denied is not None
        and denied.code() == confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED
    )
    # Write and Read imply Describe: Metadata lists alice's topics, and only those.
    listed = set(kadmin.AdminClient(alice).list_topics(timeout=10).topics)
    assert {"alice-data", "alice-no-read"} <= listed and "secret" not in listed
    # DescribeAcls shows what was created; the super user sees everything.
    admin = kadmin.AdminClient(_admin(broker, certs))  # outlives its future
    everything_of_alice = kadmin.AclBindingFilter(
        kadmin.ResourceType.ANY,
        None,
        kadmin.ResourcePatternType.ANY,
        f"User:{USER}",
        None,
        op.ANY,
        kadmin.AclPermissionType.ANY,
    )
    found = admin.describe_acls(everything_of_alice).result(timeout=30)
    assert len(found) == 4


def test_mutual_tls_super_user_and_host_matching(secure: tuple[RunningBroker, Path]) -> None:
    broker, certs = secure
    # The client certificate's subject is a super user.
    mtls = confluent_config(broker, "SSL", certs, client_certificate=True)
    assert _produce_error(mtls, "secret") is None
    # An ACL for another host does not apply to connections from 127.0.0.1.
    _create_acls(broker, certs, [_acl("secret", kadmin.AclOperation.WRITE, host="10.9.9.9")])
    error = _produce_error(_alice(broker, certs), "secret")
    assert (
        error is not None and error.code() == confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED
    )
    # Deleting ACLs through the admin API removes them from the store.
    admin = kadmin.AdminClient(_admin(broker, certs))
    removed = admin.delete_acls(
        [
            kadmin.AclBindingFilter(
                kadmin.ResourceType.TOPIC,
                "secret",
                kadmin.ResourcePatternType.LITERAL,
                None,
                "10.9.9.9",
                kadmin.AclOperation.ANY,
                kadmin.AclPermissionType.ANY,
            )  # fmt: skip
        ]
    )
    assert [len(future.result(timeout=30)) for future in removed.values()] == [1]
    assert not any(b.host == "10.9.9.9" for b in AclStore(broker.data_dir).bindings())


def test_odradek_protocol_is_authorized_the_same(secure: tuple[RunningBroker, Path]) -> None:
    broker, _ = secure
    sock = socket.create_connection(("127.0.0.1", broker.broker.listener_ports["PLAINTEXT"]), 10)
    with RawClient(sock) as client:  # User:ANONYMOUS
        request = ProduceRequest((ProducePartitionData("secret", 0, batch(1)),))
        response = client.call(request)
        assert response.partitions[0].error == TOPIC_AUTHORIZATION_FAILED
        listed = client.call(MetadataRequest(None))
        assert listed.topics == ()


def test_acls_persist_and_the_authorizer_follows_kafka_semantics(tmp_path: Path) -> None:
    from odradek.security.acl import AclBinding
    from odradek.security.kafka_principal import KafkaPrincipal

    store = AclStore(tmp_path)
    topic, allow, deny = ResourceType.TOPIC, PermissionType.ALLOW, PermissionType.DENY
    literal, prefixed = PatternType.LITERAL, PatternType.PREFIXED
    store.add(
        [
            AclBinding(topic, "pay", prefixed, "User:bob", "*", AclOperation.ALL, allow),
            AclBinding(topic, "payroll", literal, "User:*", "*", AclOperation.READ, deny),
            AclBinding(topic, "*", literal, "User:carol", "*", AclOperation.ALTER_CONFIGS, allow),
        ]
    )
    authorizer = Authorizer(AclStore(tmp_path), enabled=True, super_users=frozenset({"User:root"}))
    bob, carol = KafkaPrincipal.user("bob"), KafkaPrincipal.user("carol")
    assert authorizer.authorize(bob, "1.2.3.4", AclOperation.WRITE, topic, "payments")
    assert not authorizer.authorize(bob, "1.2.3.4", AclOperation.READ, topic, "payroll")
    assert authorizer.authorize(bob, "1.2.3.4", AclOperation.WRITE, topic, "payroll")
    assert not authorizer.authorize(bob, "1.2.3.4", AclOperation.WRITE, topic, "other")
    assert authorizer.authorize(carol, "h", AclOperation.DESCRIBE_CONFIGS, topic, "anything")
    assert not authorizer.authorize(carol, "h", AclOperation.ALTER, topic, "anything")
    assert authorizer.authorize(
        KafkaPrincipal.user("root"), "h", AclOperation.DELETE, topic, "payroll"
    )
    # A resource no ACL names: allowed only with allow.everyone.if.no.acl.found.
    assert not authorizer.authorize(carol, "h", AclOperation.READ, ResourceType.GROUP, "g")
    everyone = Authorizer(AclStore(tmp_path), enabled=True, allow_if_no_acl=True)
    assert everyone.authorize(carol, "h", AclOperation.READ, ResourceType.GROUP, "g")
    assert not everyone.authorize(carol, "h", AclOperation.WRITE, topic, "payroll")
    # The file is rewritten atomically: no temporary file is left, and it reloads as written.
    assert [p.name for p in tmp_path.iterdir()] == ["__acls.json"]
    assert len(AclStore(tmp_path).bindings()) == 3


def test_every_topic_api_refuses_a_principal_without_acls(
    secure: tuple[RunningBroker, Path],
) -> None:
    """User:ANONYMOUS on the plaintext listener, through odradek's protocol: each API answers
    TOPIC_AUTHORIZATION_FAILED on the topic and changes nothing."""
    from odradek.protocol.configs import (
        AlterableTopicConfigs,
        AlterConfigsRequest,
        DescribeConfigsRequest,
    )
    from odradek.protocol.delete_records import DeleteRecordsPartition, DeleteRecordsRequest
    from odradek.protocol.describe_topic_partitions import DescribeTopicPartitionsRequest
    from odradek.protocol.fetch import FetchRequest
    from odradek.protocol.list_offsets import ListOffsetsPartition, ListOffsetsRequest
    from odradek.protocol.topics import (
        CreatableTopic,
        CreatePartitionsRequest,
        CreatePartitionsTopic,
        CreateTopicsRequest,
        DeleteTopicsRequest,
    )
    from odradek.protocol.values.fetch import FetchPartition

    broker, _ = secure
    sock = socket.create_connection(("127.0.0.1", broker.broker.listener_ports["PLAINTEXT"]), 10)
    requests = [
        (FetchRequest((FetchPartition("secret", 0, 0),), max_wait_ms=0), "partitions"),
        (ListOffsetsRequest((ListOffsetsPartition("secret", 0, -1),)), "partitions"),
        (DeleteRecordsRequest((DeleteRecordsPartition("secret", 0, 1),)), "partitions"),
        (CreateTopicsRequest((CreatableTopic("anonymous-topic", 1),)), "topics"),
        (DeleteTopicsRequest(("secret",)), "topics"),
        (CreatePartitionsRequest((CreatePartitionsTopic("secret", 5),)), "topics"),
        (DescribeConfigsRequest(("secret",)), "topics"),
        (AlterConfigsRequest((AlterableTopicConfigs("secret", {"retention.ms": "1"}),)), "topics"),
        (DescribeTopicPartitionsRequest(("secret",)), "topics"),
        (MetadataRequest(("secret", "anonymous-auto")), "topics"),
    ]
    with RawClient(sock) as client:
        for request, field in requests:
            entries = getattr(client.call(request), field)
            assert entries and all(e.error == TOPIC_AUTHORIZATION_FAILED for e in entries), (
                request,
                entries,
            )
    assert not (broker.data_dir / "anonymous-topic-0").exists()
    assert not (broker.data_dir / "anonymous-auto-0").exists()
    assert (broker.data_dir / "secret-0").exists() and not (broker.data_dir / "secret-4").exists()


def test_init_producer_id_needs_idempotent_write_or_write_on_some_topic(
    secure: tuple[RunningBroker, Path],
) -> None:
    """As Kafka 2.8+ (KIP-679): IdempotentWrite on the cluster, or Write on any topic."""
    from odradek.protocol.init_producer_id import InitProducerIdRequest

    broker, certs = secure
    sock = socket.create_connection(("127.0.0.1", broker.broker.listener_ports["PLAINTEXT"]), 10)
    with RawClient(sock) as client:  # User:ANONYMOUS, no ACL
        client.send(InitProducerIdRequest())
        header, _ = client.read_response(InitProducerIdRequest())
        assert header.error == 31  # CLUSTER_AUTHORIZATION_FAILED
        write = _acl("anonymous-only", kadmin.AclOperation.WRITE, principal="User:ANONYMOUS")
        _create_acls(broker, certs, [write])
        try:
            response = client.call(InitProducerIdRequest())
            assert response.producer_id >= 0
        finally:
            admin = kadmin.AdminClient(_admin(broker, certs))
            removal = kadmin.AclBindingFilter(
                kadmin.ResourceType.TOPIC,
                "anonymous-only",
                kadmin.ResourcePatternType.LITERAL,
                "User:ANONYMOUS",
                "*",
                kadmin.AclOperation.WRITE,
                kadmin.AclPermissionType.ALLOW,
            )
            for future in admin.delete_acls([removal]).values():
                future.result(timeout=30)
