"""Every advertised version of the group APIs on Kafka's protocol, request by request over a
raw socket: FindCoordinator's keys, JoinGroup's MEMBER_ID_REQUIRED round trip from v4 only,
batched LeaveGroup, several groups per OffsetFetch v8, ListGroups' state filter."""

from __future__ import annotations

import socket
import struct
from typing import Any

import pytest
from kafka_helpers import create_topic
from server_helpers import RunningBroker, running_broker

from odradek.protocol.consumer_protocol import Assignment, Subscription
from odradek.protocol.kafka import api_versions as apis
from odradek.protocol.kafka.api_versions import (
    ADVERTISED,
    is_flexible_request,
    response_header_version,
)
from odradek.protocol.kafka.message_codec import decode, encode_parts, request_spec, response_spec

MEMBER_ID_REQUIRED, UNKNOWN_MEMBER_ID, UNSUPPORTED_VERSION = 79, 25, 35
INVALID_REQUEST, GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP = 42, 69, 68
TOPIC = "versions"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> RunningBroker:
    settings = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "2"}
    with running_broker(tmp_path_factory.mktemp("group-versions"), settings) as running:
        create_topic(running.bootstrap, TOPIC, 2)
        yield running


class KafkaWire:
    """Kafka requests written and responses read by the schema codec (itself checked against
    kafka-python's classes in test_kafka_codec.py)."""

    def __init__(self, broker: RunningBroker) -> None:
        self.sock = socket.create_connection(("127.0.0.1", broker.port), timeout=30)
        self.correlation_id = 0
        self.sent: list[tuple[int, int, int]] = []

    def close(self) -> None:
        self.sock.close()

    def send(self, api_key: int, version: int, body: dict[str, Any]) -> None:
        self.correlation_id += 1
        header = struct.pack(">hhih", api_key, version, self.correlation_id, 4) + b"test"
        if is_flexible_request(api_key, version):
            header += b"\x00"
        data = b"".join(bytes(p) for p in encode_parts(request_spec(api_key, version), body))
        frame = header + data
        self.sock.sendall(struct.pack(">i", len(frame)) + frame)
        self.sent.append((api_key, version, self.correlation_id))

    def receive(self) -> dict[str, Any]:
        api_key, version, correlation_id = self.sent.pop(0)
        frame = self._read(struct.unpack(">i", self._read(4))[0])
        assert struct.unpack(">i", frame[:4])[0] == correlation_id
        offset = 4 + response_header_version(api_key, version)  # no tagged header fields
        return decode(response_spec(api_key, version), memoryview(frame), offset)

    def call(self, api_key: int, version: int, body: dict[str, Any]) -> dict[str, Any]:
        self.send(api_key, version, body)
        return self.receive()

    def _read(self, count: int) -> bytes:
        data = b""
        while len(data) < count:
            chunk = self.sock.recv(count - len(data))
            if not chunk:
                raise ConnectionError("closed by the broker")
            data += chunk
        return data


@pytest.fixture
def wire(broker: RunningBroker):
    connection = KafkaWire(broker)
    yield connection
    connection.close()


def versions(api_key: int) -> range:
    found = ADVERTISED[api_key]
    return range(found.min_version, found.max_version + 1)


def join_body(group: str, member_id: str = "", instance: str | None = None) -> dict[str, Any]:
    return {
        "group_id": group,
        "session_timeout": 10000,
        "rebalance_timeout": 10000,
        "member_id": member_id,
        "group_instance_id": instance,
        "protocol_type": "consumer",
        "protocols": [{"name": "range", "metadata": Subscription((TOPIC,)).to_bytes()}],
    }


def join(wire: KafkaWire, version: int, group: str) -> dict[str, Any]:
    """A new member joined (with the MEMBER_ID_REQUIRED round trip where the version has it)."""
    answer = wire.call(apis.JOIN_GROUP, version, join_body(group))
    if version >= 4:
        assert answer["error_code"] == MEMBER_ID_REQUIRED and answer["member_id"]
        answer = wire.call(apis.JOIN_GROUP, version, join_body(group, answer["member_id"]))
    assert answer["error_code"] == 0, answer
    return answer


@pytest.mark.parametrize("version", versions(apis.FIND_COORDINATOR))
def test_find_coordinator_names_this_broker_for_groups(
    broker: RunningBroker, wire: KafkaWire, version: int
) -> None:
    host, port = broker.broker.advertised()
    body = {"key": "g", "key_type": 0, "coordinator_keys": ["g1", "g2"]}
    answer = wire.call(apis.FIND_COORDINATOR, version, body)
    entries = answer["coordinators"] if version >= 4 else [answer]
    assert [(e["error_code"], e["node_id"], e["host"], e["port"]) for e in entries] == [
        (0, broker.broker.config.broker_id, host, port)
    ] * len(entries)
    if version >= 4:
        assert [e["key"] for e in entries] == ["g1", "g2"]
    if version >= 1:
        transaction = wire.call(apis.FIND_COORDINATOR, version, {**body, "key_type": 1})
        unknown = wire.call(apis.FIND_COORDINATOR, version, {**body, "key_type": 7})
        # This broker coordinates transactional ids too.
        entries = transaction["coordinators"] if version >= 4 else [transaction]
        assert {(e["error_code"], e["node_id"], e["port"]) for e in entries} == {
            (0, broker.broker.config.broker_id, port)
        }
        entries = unknown["coordinators"] if version >= 4 else [unknown]
        assert {(e["error_code"], e["node_id"]) for e in entries} == {(INVALID_REQUEST, -1)}
        # Share-group state keys (v6+, KIP-932): no share coordinator here, INVALID_REQUEST
        # as Kafka answers without one (and before v6, where the key type does not exist).
        share = wire.call(
            apis.FIND_COORDINATOR,
            version,
            {**body, "key_type": 2, "coordinator_keys": ["g1:AAAAAAAAAAAAAAAAAAAAAA:0"]},
        )
        entries = share["coordinators"] if version >= 4 else [share]
        assert {(e["error_code"], e["node_id"]) for e in entries} == {(INVALID_REQUEST, -1)}


@pytest.mark.parametrize("version", versions(apis.JOIN_GROUP))
def test_a_member_lives_through_every_version(wire: KafkaWire, version: int) -> None:
    """Join, sync, heartbeat, commit, fetch, describe and leave at matching versions."""
    group = f"life-v{version}"
    if version < 4:  # no MEMBER_ID_REQUIRED before v4: the first join gets in
        first = wire.call(apis.JOIN_GROUP, version, join_body(group))
        assert first["error_code"] == 0 and first["member_id"]
        joined = first
    else:
        joined = join(wire, version, group)
    member = joined["member_id"]
    assert (joined["generation_id"], joined["leader"]) == (1, member)
    assert joined["protocol_name"] == "range"
    assert [m["member_id"] for m in joined["members"]] == [member]
    generation = joined["generation_id"]
    assignment = Assignment({TOPIC: (0, 1)}).to_bytes()
    synced = wire.call(
        apis.SYNC_GROUP,
        min(version, 5),
        {
            "group_id": group,
            "generation_id": generation,
            "member_id": member,
            "protocol_type": "consumer",
            "protocol_name": "range",
            "assignments": [{"member_id": member, "assignment": assignment}],
        },
    )
    assert synced["error_code"] == 0 and bytes(synced["assignment"]) == assignment
    beat = {"group_id": group, "generation_id": generation, "member_id": member}
    assert wire.call(apis.HEARTBEAT, min(version, 4), beat)["error_code"] == 0
    commit_version = min(max(version, 2), 9)
    committed = wire.call(
        apis.OFFSET_COMMIT,
        commit_version,
        {
            "group_id": group,
            "generation_id_or_member_epoch": generation,
            "member_id": member,
            "retention_time": -1,
            "topics": [
                {
                    "name": TOPIC,
                    "partitions": [
                        {"partition_index": 1, "committed_offset": 7, "committed_metadata": "m"}
                    ],
                }
            ],
        },
    )
    assert committed["topics"] == [
        {"name": TOPIC, "partitions": [{"partition_index": 1, "error_code": 0}]}
    ]
    fetch_version = min(max(version, 1), 7)
    fetched = wire.call(
        apis.OFFSET_FETCH,
        fetch_version,
        {"group_id": group, "topics": [{"name": TOPIC, "partition_indexes": [0, 1]}]},
    )
    assert [
        (p["partition_index"], p["committed_offset"], p["metadata"], p["error_code"])
        for p in fetched["topics"][0]["partitions"]
    ] == [(0, -1, "", 0), (1, 7, "m", 0)]
    described = wire.call(
        apis.DESCRIBE_GROUPS,
        min(version, 5),
        {"groups": [group], "include_authorized_operations": True},
    )["groups"][0]
    assert (described["error_code"], described["group_state"], described["protocol_data"]) == (
        0,
        "Stable",
        "range",
    )
    assert [bytes(m["member_assignment"]) for m in described["members"]] == [assignment]
    leave_version = min(version, 5)
    leave = (
        {"group_id": group, "member_id": member}
        if leave_version < 3
        else {"group_id": group, "members": [{"member_id": member}]}
    )
    left = wire.call(apis.LEAVE_GROUP, leave_version, leave)
    assert left["error_code"] == 0
    listed = wire.call(apis.LIST_GROUPS, min(version, 4), {"states_filter": []})["groups"]
    assert {"group_id": group, "protocol_type": "consumer"}.items() <= next(
        g for g in listed if g["group_id"] == group
    ).items()


def test_a_stale_member_id_and_generation_get_kafkas_errors(wire: KafkaWire) -> None:
    group = "stale"
    joined = join(wire, 9, group)
    beat = {"group_id": group, "generation_id": joined["generation_id"], "member_id": "nobody"}
    assert wire.call(apis.HEARTBEAT, 4, beat)["error_code"] == UNKNOWN_MEMBER_ID
    stale = {**beat, "member_id": joined["member_id"], "generation_id": 99}
    assert wire.call(apis.HEARTBEAT, 4, stale)["error_code"] == 22  # ILLEGAL_GENERATION


def test_leave_group_v3_leaves_several_members_each_with_its_outcome(
    broker: RunningBroker, wire: KafkaWire
) -> None:
    group = "batched-leave"
    first = join(wire, 9, group)
    other = KafkaWire(broker)
    try:
        second = other.call(apis.JOIN_GROUP, 9, join_body(group))  # MEMBER_ID_REQUIRED
        other.send(apis.JOIN_GROUP, 9, join_body(group, second["member_id"]))  # parked
        wire.send(apis.JOIN_GROUP, 9, join_body(group, first["member_id"]))  # completes both
        rejoined, joined = wire.receive(), other.receive()
        assert rejoined["error_code"] == joined["error_code"] == 0
        assert rejoined["generation_id"] == joined["generation_id"] == 2
        members = [first["member_id"], second["member_id"], "unknown-member"]
        left = wire.call(
            apis.LEAVE_GROUP,
            5,
            {"group_id": group, "members": [{"member_id": m, "reason": "test"} for m in members]},
        )
    finally:
        other.close()
    assert left["error_code"] == 0
    assert [(m["member_id"], m["error_code"]) for m in left["members"]] == [
        (members[0], 0),
        (members[1], 0),
        (members[2], UNKNOWN_MEMBER_ID),
    ]
    states = wire.call(apis.LIST_GROUPS, 4, {"states_filter": ["empty"]})["groups"]
    assert {"group_id": group, "protocol_type": "consumer", "group_state": "Empty"} in states


def _standalone_commit(wire: KafkaWire, group: str, offset: int) -> None:
    answer = wire.call(
        apis.OFFSET_COMMIT,
        9,
        {
            "group_id": group,
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "topics": [
                {"name": TOPIC, "partitions": [{"partition_index": 0, "committed_offset": offset}]}
            ],
        },
    )
    assert answer["topics"][0]["partitions"][0]["error_code"] == 0


def test_offset_fetch_v8_answers_several_groups_and_v1_one(wire: KafkaWire) -> None:
    _standalone_commit(wire, "fetch-a", 3)
    _standalone_commit(wire, "fetch-b", 5)
    answer = wire.call(
        apis.OFFSET_FETCH,
        8,
        {
            "groups": [
                {"group_id": "fetch-a", "topics": None},
                {"group_id": "fetch-b", "topics": [{"name": TOPIC, "partition_indexes": [0]}]},
                {"group_id": "fetch-none", "topics": None},
            ],
            "require_stable": True,
        },
    )
    found = {
        g["group_id"]: [
            (t["name"], p["partition_index"], p["committed_offset"])
            for t in g["topics"]
            for p in t["partitions"]
        ]
        for g in answer["groups"]
    }
    assert found == {"fetch-a": [(TOPIC, 0, 3)], "fetch-b": [(TOPIC, 0, 5)], "fetch-none": []}
    v1 = wire.call(
        apis.OFFSET_FETCH,
        1,
        {"group_id": "fetch-b", "topics": [{"name": TOPIC, "partition_indexes": [0]}]},
    )
    assert v1["topics"][0]["partitions"][0]["committed_offset"] == 5


def test_list_groups_v4_filters_by_state(wire: KafkaWire) -> None:
    _standalone_commit(wire, "filter-empty", 1)
    join(wire, 9, "filter-joined")  # CompletingRebalance until it syncs
    empty = wire.call(apis.LIST_GROUPS, 4, {"states_filter": ["Empty"]})["groups"]
    rebalancing = wire.call(apis.LIST_GROUPS, 4, {"states_filter": ["CompletingRebalance"]})
    names = {g["group_id"] for g in empty}
    assert "filter-empty" in names and "filter-joined" not in names
    assert {g["group_state"] for g in empty} == {"Empty"}
    assert "filter-joined" in {g["group_id"] for g in rebalancing["groups"]}


@pytest.mark.parametrize("version", versions(apis.DELETE_GROUPS))
def test_delete_groups_and_offset_delete(wire: KafkaWire, version: int) -> None:
    group = f"delete-v{version}"
    _standalone_commit(wire, group, 4)
    removed = wire.call(
        apis.OFFSET_DELETE,
        0,
        {"group_id": group, "topics": [{"name": TOPIC, "partitions": [{"partition_index": 0}]}]},
    )
    assert removed["error_code"] == 0
    assert removed["topics"] == [
        {"name": TOPIC, "partitions": [{"partition_index": 0, "error_code": 0}]}
    ]
    fetched = wire.call(
        apis.OFFSET_FETCH, 7, {"group_id": group, "topics": None, "require_stable": False}
    )
    assert fetched["topics"] == []
    joined = join(wire, 9, f"{group}-busy")
    answer = wire.call(
        apis.DELETE_GROUPS, version, {"groups_names": [group, f"{group}-busy", "never-existed"]}
    )
    assert [(r["group_id"], r["error_code"]) for r in answer["results"]] == [
        (group, 0),
        (f"{group}-busy", NON_EMPTY_GROUP),
        ("never-existed", GROUP_ID_NOT_FOUND),
    ]
    assert joined["member_id"]


# --- bad input -------------------------------------------------------------------------------


def test_bad_group_requests_get_kafkas_error_codes(wire: KafkaWire) -> None:
    empty = wire.call(apis.JOIN_GROUP, 9, join_body(""))
    assert empty["error_code"] == 24  # INVALID_GROUP_ID
    too_short = wire.call(apis.JOIN_GROUP, 9, {**join_body("bad-timeout"), "session_timeout": 1})
    assert too_short["error_code"] == 26  # INVALID_SESSION_TIMEOUT
    unknown_topic = wire.call(
        apis.OFFSET_COMMIT,
        9,
        {
            "group_id": "bad-commit",
            "generation_id_or_member_epoch": -1,
            "member_id": "",
            "topics": [
                {
                    "name": "no-such-topic",
                    "partitions": [{"partition_index": 0, "committed_offset": 1}],
                }
            ],
        },
    )
    assert unknown_topic["topics"][0]["partitions"][0]["error_code"] == 3
    stale_sync = wire.call(
        apis.SYNC_GROUP,
        5,
        {"group_id": "never-joined", "generation_id": 3, "member_id": "ghost", "assignments": []},
    )
    assert stale_sync["error_code"] == UNKNOWN_MEMBER_ID


def test_garbage_protocol_metadata_is_relayed_untouched(wire: KafkaWire) -> None:
    """The broker does not read the members' metadata to join them: any bytes go back."""
    garbage = bytes(range(256)) * 400  # 100 KB that no consumer protocol parses
    body = join_body("garbage-metadata")
    body["protocols"] = [{"name": "range", "metadata": garbage}]
    answer = wire.call(apis.JOIN_GROUP, 9, body)
    answer = wire.call(apis.JOIN_GROUP, 9, {**body, "member_id": answer["member_id"]})
    assert answer["error_code"] == 0
    assert [bytes(m["metadata"]) for m in answer["members"]] == [garbage]
    described = wire.call(apis.DESCRIBE_GROUPS, 5, {"groups": ["garbage-metadata"]})
    assert described["groups"][0]["error_code"] == 0


def test_a_truncated_join_group_closes_only_its_connection(
    broker: RunningBroker, wire: KafkaWire
) -> None:
    spec = request_spec(apis.JOIN_GROUP, 9)
    data = b"".join(bytes(p) for p in encode_parts(spec, join_body("truncated")))
    header = struct.pack(">hhih", apis.JOIN_GROUP, 9, 1, 4) + b"test\x00"
    frame = header + data[: len(data) // 2]
    wire.sock.sendall(struct.pack(">i", len(frame)) + frame)
    assert wire.sock.recv(1) == b""  # closed by the broker
    fresh = KafkaWire(broker)
    try:
        assert join(fresh, 9, "after-truncation")["generation_id"] == 1
    finally:
        fresh.close()
