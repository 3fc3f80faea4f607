"""Helpers of the group tests: brokers with test-sized group settings, raw group requests."""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from server_helpers import RawClient, RunningBroker, running_broker

from odradek.clock import SYSTEM_CLOCK, Clock
from odradek.protocol.consumer_protocol import Subscription
from odradek.protocol.join_group import JoinGroupProtocol, JoinGroupRequest, JoinGroupResponse
from odradek.protocol.offset_commit import OffsetCommitPartition, OffsetCommitRequest
from odradek.protocol.offset_fetch import OffsetFetchGroup, OffsetFetchRequest
from odradek.protocol.sync_group import SyncGroupAssignment, SyncGroupRequest, SyncGroupResponse
from odradek.protocol.topics import CreatableTopic, CreateTopicsRequest

GROUP_SETTINGS = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "100",
    "offsets.topic.num.partitions": "3",
}
"""Small settings so groups form at once and a test's few groups need few partitions."""


@contextmanager
def group_broker(
    tmp_path: Path, settings: Mapping[str, str] | None = None, clock: Clock = SYSTEM_CLOCK
) -> Iterator[RunningBroker]:
    with running_broker(tmp_path, {**GROUP_SETTINGS, **(settings or {})}, clock) as broker:
        yield broker


def create_topic(client: RawClient, name: str, partitions: int) -> None:
    response = client.call(CreateTopicsRequest((CreatableTopic(name, partitions),)))
    assert response.topics[0].error == 0, response


def protocols(*topics: str, names: tuple[str, ...] = ("range",)) -> tuple[JoinGroupProtocol, ...]:
    metadata = Subscription(tuple(topics)).to_bytes()
    return tuple(JoinGroupProtocol(name, metadata) for name in names)


def join(
    client: RawClient,
    group: str,
    member_id: str = "",
    session_timeout_ms: int = 10000,
    rebalance_timeout_ms: int = 10000,
    instance: str | None = None,
    offered: tuple[JoinGroupProtocol, ...] | None = None,
) -> JoinGroupResponse:
    """JoinGroup, repeating it once with the member id a MEMBER_ID_REQUIRED answer gives."""
    request = JoinGroupRequest(
        group,
        session_timeout_ms,
        "consumer",
        offered or protocols("t"),
        rebalance_timeout_ms,
        member_id,
        instance,
    )
    response = client.call(request)
    if response.error_code == 79:
        request = JoinGroupRequest(
            group,
            session_timeout_ms,
            "consumer",
            offered or protocols("t"),
            rebalance_timeout_ms,
            response.member_id,
            instance,
        )
        response = client.call(request)
    return response


def sync(
    client: RawClient,
    group: str,
    joined: JoinGroupResponse,
    assignments: Mapping[str, bytes] | None = None,
    instance: str | None = None,
) -> SyncGroupResponse:
    entries = tuple(SyncGroupAssignment(m, a) for m, a in (assignments or {}).items())
    request = SyncGroupRequest(
        group,
        joined.generation_id,
        joined.member_id,
        instance,
        "consumer",
        joined.protocol_name,
        entries,
    )
    return client.call(request)


def commit(
    client: RawClient,
    group: str,
    offsets: Mapping[tuple[str, int], int],
    generation_id: int = -1,
    member_id: str = "",
    metadata: str | None = None,
) -> dict[tuple[str, int], int]:
    """OffsetCommit (each offset with ``metadata``); each partition's error code."""
    request = OffsetCommitRequest(
        group,
        tuple(OffsetCommitPartition(t, p, o, -1, metadata) for (t, p), o in offsets.items()),
        generation_id,
        member_id,
    )
    response = client.call(request)
    return {(r.topic, r.partition): r.error for r in response.partitions}


def fetch(client: RawClient, group: str) -> dict[tuple[str, int], int]:
    """The committed offsets of ``group``."""
    response = client.call(OffsetFetchRequest((OffsetFetchGroup(group),)))
    entry = response.groups[0]
    assert entry.error == 0, entry
    return {(p.topic, p.partition): p.committed_offset for p in entry.partitions}
