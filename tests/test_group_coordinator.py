"""The group coordinator over odradek's protocol: joins, syncs, heartbeats, leaves, commits and
their error codes, with a real broker."""

from __future__ import annotations

import threading
from pathlib import Path

from group_helpers import commit, create_topic, fetch, group_broker, join, protocols, sync

from odradek.protocol.find_coordinator import FindCoordinatorRequest
from odradek.protocol.heartbeat import HeartbeatRequest
from odradek.protocol.join_group import JoinGroupRequest


def test_a_lone_member_joins_syncs_commits_and_fetches(tmp_path: Path) -> None:
    with group_broker(tmp_path) as broker, broker.connect() as client:
        create_topic(client, "t", 2)
        found = client.call(FindCoordinatorRequest(("g",))).coordinators[0]
        assert (found.error, found.node_id, found.port) == (0, 0, broker.port)
        joined = join(client, "g")
        assert joined.error_code == 0, joined
        assert joined.leader == joined.member_id
        assert joined.generation_id == 1
        assert [m.member_id for m in joined.members] == [joined.member_id]
        synced = sync(client, "g", joined, {joined.member_id: b"assignment"})
        assert (synced.error_code, synced.assignment) == (0, b"assignment")
        beat = client.call(HeartbeatRequest("g", 1, joined.member_id))
        assert beat.error_code == 0
        errors = commit(client, "g", {("t", 0): 5, ("t", 1): 7}, 1, joined.member_id)
        assert errors == {("t", 0): 0, ("t", 1): 0}
        assert fetch(client, "g") == {("t", 0): 5, ("t", 1): 7}


def test_first_join_without_member_id_is_answered_member_id_required(tmp_path: Path) -> None:
    with group_broker(tmp_path) as broker, broker.connect() as client:
        response = client.call(JoinGroupRequest("g", 10000, "consumer", protocols("t")))
        assert response.error_code == 79  # MEMBER_ID_REQUIRED
        assert response.member_id.startswith("raw-test-")


def test_two_members_share_a_generation_and_only_the_leader_gets_the_members(
    tmp_path: Path,
) -> None:
    with group_broker(tmp_path) as broker, broker.connect() as a, broker.connect() as b:
        first = join(a, "g")
        sync(a, "g", first, {first.member_id: b"all"})
        results = {}

        def rejoin_a() -> None:
            results["a"] = join(a, "g", first.member_id)

        thread = threading.Thread(target=rejoin_a)
        second_joined = {}

        def join_b() -> None:
            second_joined["b"] = join(b, "g")

        thread_b = threading.Thread(target=join_b)
        thread_b.start()
        # a learns of the rebalance from its heartbeat, then rejoins
        for _ in range(100):
            if a.call(HeartbeatRequest("g", 1, first.member_id)).error_code == 27:
                break
        thread.start()
        thread.join(10)
        thread_b.join(10)
        ra, rb = results["a"], second_joined["b"]
        assert ra.error_code == rb.error_code == 0
        assert ra.generation_id == rb.generation_id == 2
        assert ra.leader == rb.leader == ra.member_id
        assert {m.member_id for m in ra.members} == {ra.member_id, rb.member_id}
        assert rb.members == ()
