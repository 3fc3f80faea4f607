"""Group ACLs as Kafka's KafkaApis applies them, on both protocols: joining, committing and
fetching offsets need Read (or Describe) on the group, committing also Read on the topic,
deleting needs Delete, ListGroups shows only describable groups, and every refusal is
GROUP_AUTHORIZATION_FAILED (or TOPIC_AUTHORIZATION_FAILED for a topic) with an audit line."""

from __future__ import annotations

import logging
import socket
import time
from pathlib import Path

import confluent_kafka
import confluent_kafka.admin as kadmin
import pytest
from security_helpers import ADMIN, ADMIN_PASSWORD, USER, confluent_config, secure_broker
from server_helpers import RawClient, RunningBroker

from odradek.protocol.delete_groups import DeleteGroupsRequest
from odradek.protocol.describe_groups import DescribeGroupsRequest
from odradek.protocol.find_coordinator import FindCoordinatorRequest
from odradek.protocol.heartbeat import HeartbeatRequest
from odradek.protocol.join_group import JoinGroupProtocol, JoinGroupRequest
from odradek.protocol.list_groups import ListGroupsRequest
from odradek.protocol.offset_commit import OffsetCommitPartition, OffsetCommitRequest
from odradek.protocol.offset_delete import GroupPartition as DeletedPartition
from odradek.protocol.offset_delete import OffsetDeleteRequest
from odradek.protocol.offset_fetch import GroupPartition, OffsetFetchGroup, OffsetFetchRequest
from odradek.security.acl import (
    AclBinding,
    AclOperation,
    PatternType,
    PermissionType,
    ResourceType,
)
from odradek.security.acl_store import AclStore

TOPIC_AUTHORIZATION_FAILED, GROUP_AUTHORIZATION_FAILED = 29, 30
AUTHORIZER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": f"User:{ADMIN}",
}


@pytest.fixture(scope="module")
def secure(tmp_path_factory: pytest.TempPathFactory) -> tuple[RunningBroker, Path]:
    with secure_broker(tmp_path_factory.mktemp("group-acls"), AUTHORIZER) as running:
        broker, certs = running
        admin = kadmin.AdminClient(_admin(*running))
        topics = [kadmin.NewTopic(name, 1, 1) for name in ("open", "closed")]
        for future in admin.create_topics(topics).values():
            future.result(timeout=30)
        producer = confluent_kafka.Producer(_admin(*running))
        for topic in ("open", "closed"):
            for index in range(3):
                producer.produce(topic, f"v{index}".encode())
        producer.flush(30)
        _allow(broker, "User:*", ResourceType.TOPIC, "open", AclOperation.READ)
        _allow(broker, f"User:{USER}", ResourceType.GROUP, "alice-", AclOperation.READ, True)
        yield running


def _admin(broker: RunningBroker, certs: Path) -> dict[str, str]:
    return confluent_config(broker, "SASL_SSL", certs, "SCRAM-SHA-512", ADMIN, ADMIN_PASSWORD)


def _alice(broker: RunningBroker, certs: Path) -> dict[str, str]:
    return confluent_config(broker, "SASL_SSL", certs, "SCRAM-SHA-512")


def _allow(
    broker: RunningBroker,
    principal: str,
    resource_type: ResourceType,
    name: str,
    operation: AclOperation,
    prefixed: bool = False,
) -> None:
    """An ALLOW binding written to the broker's ACL file (the broker reloads it on change)."""
    pattern = PatternType.PREFIXED if prefixed else PatternType.LITERAL
    binding = AclBinding(
        resource_type, name, pattern, principal, "*", operation, PermissionType.ALLOW
    )
    AclStore(broker.data_dir).add([binding])
    time.sleep(0.02)  # a distinct mtime for the broker's stat


def _consume_error(config: dict[str, str], group: str, topic: str) -> confluent_kafka.KafkaError:
    """The first error a group consumer of ``topic`` gets, or its first message's."""
    consumer = confluent_kafka.Consumer(
        {**config, "group.id": group, "auto.offset.reset": "earliest", "enable.auto.commit": False}
    )
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None:
                return message.error()
        raise AssertionError(f"no message and no error for group {group}")
    finally:
        consumer.close()


def test_kafka_clients_need_read_on_the_group(
    secure: tuple[RunningBroker, Path], caplog: pytest.LogCaptureFixture
) -> None:
    broker, certs = secure
    alice = _alice(broker, certs)
    caplog.set_level(logging.WARNING, logger="odradek.audit")
    error = _consume_error(alice, "bob-group", "open")
    assert (
        error is not None and error.code() == confluent_kafka.KafkaError.GROUP_AUTHORIZATION_FAILED
    )
    audit = [r.getMessage() for r in caplog.records if r.name == "odradek.audit"]
    assert any(
        f"principal=User:{USER} operation=" in line and "resource=Group:bob-group" in line
        for line in audit
    ), audit
    # Read on the alice- prefix lets alice join, consume and commit.
    consumer = confluent_kafka.Consumer(
        {
            **alice,
            "group.id": "alice-g",
            "auto.offset.reset": "earliest",
            "enable.auto.commit": False,
        }
    )
    try:
        consumer.subscribe(["open"])
        message = None
        deadline = time.monotonic() + 30
        while message is None and time.monotonic() < deadline:
            message = consumer.poll(0.5)
        assert message is not None and message.error() is None
        committed = consumer.commit(message=message, asynchronous=False)
        assert committed[0].error is None and committed[0].offset == message.offset() + 1
        # Committing on a topic alice may not read is refused for that topic alone.
        refused = consumer.commit(
            offsets=[confluent_kafka.TopicPartition("closed", 0, 1)], asynchronous=False
        )
        assert refused[0].error is not None
    except confluent_kafka.KafkaException as failure:
        assert failure.args[0].code() == confluent_kafka.KafkaError.TOPIC_AUTHORIZATION_FAILED
    finally:
        consumer.close()


def test_kafka_admin_lists_describes_and_deletes_only_what_acls_allow(
    secure: tuple[RunningBroker, Path],
) -> None:
    broker, certs = secure
    admin_config = _admin(broker, certs)
    for group in ("admin-g", "alice-h"):  # groups with committed offsets, made by the admin
        consumer = confluent_kafka.Consumer({**admin_config, "group.id": group})
        consumer.commit(offsets=[confluent_kafka.TopicPartition("open", 0, 1)], asynchronous=False)
        consumer.close()
    alice = kadmin.AdminClient(_alice(broker, certs))
    listed = {g.group_id for g in alice.list_consumer_groups().result(timeout=30).valid}
    assert "alice-h" in listed and "admin-g" not in listed
    admin = kadmin.AdminClient(admin_config)  # outlives its future
    everything = {g.group_id for g in admin.list_consumer_groups().result(timeout=30).valid}
    assert {"admin-g", "alice-h"} <= everything
    with pytest.raises(confluent_kafka.KafkaException) as denied:
        alice.describe_consumer_groups(["admin-g"])["admin-g"].result(timeout=30)
    assert denied.value.args[0].code() == confluent_kafka.KafkaError.GROUP_AUTHORIZATION_FAILED
    described = alice.describe_consumer_groups(["alice-h"])["alice-h"].result(timeout=30)
    assert described.group_id == "alice-h"
    # Read implies Describe but not Delete.
    with pytest.raises(confluent_kafka.KafkaException) as denied:
        alice.delete_consumer_groups(["alice-h"])["alice-h"].result(timeout=30)
    assert denied.value.args[0].code() == confluent_kafka.KafkaError.GROUP_AUTHORIZATION_FAILED
    offsets = alice.list_consumer_group_offsets(
        [confluent_kafka.ConsumerGroupTopicPartitions("alice-h")]
    )
    found = offsets["alice-h"].result(timeout=30).topic_partitions
    assert [(p.topic, p.offset) for p in found] == [("open", 1)]
    with pytest.raises(confluent_kafka.KafkaException) as denied:
        alice.list_consumer_group_offsets(
            [confluent_kafka.ConsumerGroupTopicPartitions("admin-g")]
        )["admin-g"].result(timeout=30)
    assert denied.value.args[0].code() == confluent_kafka.KafkaError.GROUP_AUTHORIZATION_FAILED


def test_odradek_protocol_groups_are_authorized_the_same(
    secure: tuple[RunningBroker, Path], caplog: pytest.LogCaptureFixture
) -> None:
    broker, _ = secure
    caplog.set_level(logging.WARNING, logger="odradek.audit")
    sock = socket.create_connection(("127.0.0.1", broker.broker.listener_ports["PLAINTEXT"]), 10)
    with RawClient(sock) as client:  # User:ANONYMOUS, no group ACLs
        found = client.call(FindCoordinatorRequest(("anon-g",)))
        assert found.coordinators[0].error == GROUP_AUTHORIZATION_FAILED
        joined = client.call(
            JoinGroupRequest("anon-g", 10000, "consumer", (JoinGroupProtocol("range", b""),))
        )
        assert joined.error_code == GROUP_AUTHORIZATION_FAILED
        beat = client.call(HeartbeatRequest("anon-g", 1, "m"))
        assert beat.error_code == GROUP_AUTHORIZATION_FAILED
        commit = OffsetCommitRequest(
            "anon-g",
            (OffsetCommitPartition("open", 0, 1), OffsetCommitPartition("closed", 0, 1)),
        )
        committed = client.call(commit)
        assert [p.error for p in committed.partitions] == [GROUP_AUTHORIZATION_FAILED] * 2
        fetched = client.call(OffsetFetchRequest((OffsetFetchGroup("anon-g"),)))
        assert fetched.groups[0].error == GROUP_AUTHORIZATION_FAILED
        described = client.call(DescribeGroupsRequest(("alice-h",)))
        assert described.groups[0].error == GROUP_AUTHORIZATION_FAILED
        deleted = client.call(DeleteGroupsRequest(("alice-h",)))
        assert deleted.results[0].error == GROUP_AUTHORIZATION_FAILED
        removed = client.call(OffsetDeleteRequest("alice-h", (DeletedPartition("open", 0),)))
        assert removed.error_code == GROUP_AUTHORIZATION_FAILED
        assert client.call(ListGroupsRequest()).groups == ()

        # Read on the group: the commit goes through for the readable topic only.
        _allow(broker, "User:ANONYMOUS", ResourceType.GROUP, "anon-g", AclOperation.READ)
        committed = client.call(commit)
        assert [p.error for p in committed.partitions] == [0, TOPIC_AUTHORIZATION_FAILED]
        wanted = (GroupPartition("open", 0), GroupPartition("closed", 0))
        fetched = client.call(OffsetFetchRequest((OffsetFetchGroup("anon-g", wanted),)))
        by_topic = {p.topic: p for p in fetched.groups[0].partitions}
        assert by_topic["open"].committed_offset == 1 and by_topic["open"].error == 0
        assert by_topic["closed"].error == TOPIC_AUTHORIZATION_FAILED
        assert [g.group_id for g in client.call(ListGroupsRequest()).groups] == ["anon-g"]
        assert client.call(FindCoordinatorRequest(("anon-g",))).coordinators[0].error == 0
        # Delete on the group: OffsetDelete and DeleteGroups.
        assert client.call(DeleteGroupsRequest(("anon-g",))).results[0].error == (
            GROUP_AUTHORIZATION_FAILED
        )
        _allow(broker, "User:ANONYMOUS", ResourceType.GROUP, "anon-g", AclOperation.DELETE)
        assert client.call(DeleteGroupsRequest(("anon-g",))).results[0].error == 0
    audit = [r.getMessage() for r in caplog.records if r.name == "odradek.audit"]
    assert any(
        "principal=User:ANONYMOUS operation=Read resource=Group:anon-g" in line for line in audit
    ), audit


def test_every_version_of_the_group_apis_answers_group_authorization_failed(
    secure: tuple[RunningBroker, Path],
) -> None:
    """On Kafka's protocol, every served version of each group API encodes the refusal."""
    from test_kafka_group_versions import KafkaWire, join_body, versions

    from odradek.protocol.kafka import api_versions as apis

    broker, _ = secure
    wire = KafkaWire(broker)  # the PLAINTEXT listener: User:ANONYMOUS, Read on anon-g only
    try:
        group = "nobody-g"
        for version in versions(apis.JOIN_GROUP):
            answer = wire.call(apis.JOIN_GROUP, version, join_body(group))
            assert answer["error_code"] == GROUP_AUTHORIZATION_FAILED, (version, answer)
        member = {"group_id": group, "generation_id": 1, "member_id": "m"}
        for version in versions(apis.SYNC_GROUP):
            body = {**member, "protocol_type": "consumer", "protocol_name": "range",
                    "assignments": []}  # fmt: skip
            answer = wire.call(apis.SYNC_GROUP, version, body)
            assert answer["error_code"] == GROUP_AUTHORIZATION_FAILED, (version, answer)
        for version in versions(apis.HEARTBEAT):
            answer = wire.call(apis.HEARTBEAT, version, member)
            assert answer["error_code"] == GROUP_AUTHORIZATION_FAILED, (version, answer)
        for version in versions(apis.LEAVE_GROUP):
            body = {"group_id": group, "member_id": "m", "members": [{"member_id": "m"}]}
            answer = wire.call(apis.LEAVE_GROUP, version, body)
            assert answer["error_code"] == GROUP_AUTHORIZATION_FAILED, (version, answer)
        for version in versions(apis.OFFSET_COMMIT):
            body = {
                "group_id": group,
                "generation_id_or_member_epoch": -1,
                "member_id": "",
                "topics": [{"name": "open", "partitions": [
                    {"partition_index": 0, "committed_offset": 1, "committed_metadata": ""}]}],
            }  # fmt: skip
            answer = wire.call(apis.OFFSET_COMMIT, version, body)
            codes = [p["error_code"] for t in answer["topics"] for p in t["partitions"]]
            assert codes == [GROUP_AUTHORIZATION_FAILED], (version, answer)
        for version in versions(apis.FIND_COORDINATOR):
            body = {"key": group, "key_type": 0, "coordinator_keys": [group]}
            answer = wire.call(apis.FIND_COORDINATOR, version, body)
            found = answer["coordinators"][0] if version >= 4 else answer
            assert found["error_code"] == GROUP_AUTHORIZATION_FAILED, (version, answer)
    finally:
        wire.close()
