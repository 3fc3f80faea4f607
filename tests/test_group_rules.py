"""Kafka's group rules and error codes on hostile or stale input: static members, protocols,
unknown members, old generations, bad group ids, oversized metadata, batched leaves."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from group_helpers import commit, create_topic, fetch, group_broker, join, protocols, sync
from log_manager_helpers import wait_until
from server_helpers import batch

from odradek.protocol.describe_groups import DescribeGroupsRequest
from odradek.protocol.heartbeat import HeartbeatRequest
from odradek.protocol.join_group import JoinGroupProtocol, JoinGroupRequest
from odradek.protocol.leave_group import LeaveGroupRequest, LeavingMember
from odradek.protocol.list_groups import ListGroupsRequest
from odradek.protocol.offset_commit import OffsetCommitPartition, OffsetCommitRequest
from odradek.protocol.offset_delete import OffsetDeleteRequest
from odradek.protocol.offset_fetch import GroupPartition
from odradek.protocol.produce import ProduceRequest
from odradek.protocol.sync_group import SyncGroupRequest
from odradek.protocol.values.produce import ProducePartitionData

NONE, UNKNOWN_TOPIC, ILLEGAL_GENERATION, INCONSISTENT_PROTOCOL = 0, 3, 22, 23
INVALID_GROUP_ID, UNKNOWN_MEMBER, INVALID_SESSION_TIMEOUT, REBALANCING = 24, 25, 26, 27
GROUP_MAX_SIZE, FENCED, SUBSCRIBED, UNKNOWN_SERVER_ERROR = 81, 82, 86, -1


def state(client, group: str) -> tuple[str, int]:
    described = client.call(DescribeGroupsRequest((group,))).groups[0]
    return described.group_state, len(described.members)


def test_a_static_member_rejoining_within_its_session_causes_no_rebalance(tmp_path: Path) -> None:
    with group_broker(tmp_path) as broker, broker.connect() as a, broker.connect() as b:
        leader = join(a, "g", instance="i-a")
        sync(a, "g", leader, {leader.member_id: b"for-a"})
        assert state(a, "g") == ("Stable", 1)
        with broker.connect() as restarted:
            again = join(restarted, "g", instance="i-a")
            assert again.error_code == NONE
            assert again.generation_id == leader.generation_id
            assert again.member_id != leader.member_id
            synced = sync(restarted, "g", again, instance="i-a")
            assert (synced.error_code, synced.assignment) == (NONE, b"for-a")
            assert state(b, "g") == ("Stable", 1)
            beat = restarted.call(
                HeartbeatRequest("g", again.generation_id, again.member_id, "i-a")
            )
            assert beat.error_code == NONE
        # the old incarnation is fenced, whatever it sends
        old = a.call(HeartbeatRequest("g", leader.generation_id, leader.member_id, "i-a"))
        assert old.error_code == FENCED
        assert join(a, "g", member_id=leader.member_id, instance="i-a").error_code == FENCED
        old_commit = OffsetCommitRequest(
            "g", (OffsetCommitPartition("t", 0, 1),), leader.generation_id, leader.member_id, "i-a"
        )
        assert a.call(old_commit).partitions[0].error == FENCED


def test_a_member_with_no_protocol_in_common_is_refused(tmp_path: Path) -> None:
    with group_broker(tmp_path) as broker, broker.connect() as a, broker.connect() as b:
        first = join(a, "g", offered=protocols("t", names=("range",)))
        sync(a, "g", first, {first.member_id: b""})
        other = join(b, "g", offered=protocols("t", names=("roundrobin",)))
        assert other.error_code == INCONSISTENT_PROTOCOL
        for bad in [
            JoinGroupRequest("g", 10000, "", protocols("t")),
            JoinGroupRequest("h", 10000, "consumer", ()),
            JoinGroupRequest("h", 10000, "consumer", protocols("t", names=("x", "x"))),
        ]:
            assert b.call(bad).error_code == INCONSISTENT_PROTOCOL


def test_the_protocol_most_members_prefer_is_chosen(tmp_path: Path) -> None:
    with group_broker(tmp_path, {"group.initial.rebalance.delay.ms": "300"}) as broker:
        results = []
        preferences = [("roundrobin", "range"), ("range", "roundrobin"), ("range", "roundrobin")]

        def member(names: tuple[str, ...]) -> None:
            with broker.connect() as client:
                results.append(join(client, "g", offered=protocols("t", names=names)))

        threads = [threading.Thread(target=member, args=(p,)) for p in preferences]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(20)
    assert {r.protocol_name for r in results} == {"range"}
    assert {r.generation_id for r in results} == {1}


def test_unknown_members_stale_generations_and_unknown_topics_get_kafkas_codes(
    tmp_path: Path,
) -> None:
    with group_broker(tmp_path) as broker, broker.connect() as client:
        create_topic(client, "t", 1)
        member = join(client, "g")
        sync(client, "g", member, {member.member_id: b""})
        assert client.call(HeartbeatRequest("g", 1, "nobody")).error_code == UNKNOWN_MEMBER
        assert client.call(HeartbeatRequest("nogroup", 1, "x")).error_code == UNKNOWN_MEMBER
        assert join(client, "g", member_id="nobody").error_code == UNKNOWN_MEMBER
        stale = client.call(SyncGroupRequest("g", 0, member.member_id))
        assert stale.error_code == ILLEGAL_GENERATION
        assert client.call(HeartbeatRequest("g", 7, member.member_id)).error_code == (
            ILLEGAL_GENERATION
        )
        errors = commit(client, "g", {("t", 0): 1}, 0, member.member_id)
        assert errors == {("t", 0): ILLEGAL_GENERATION}
        assert commit(client, "g", {("t", 0): 1}) == {("t", 0): UNKNOWN_MEMBER}  # not empty
        errors = commit(client, "g", {("t", 0): 1, ("t", 5): 1, ("zz", 0): 1}, 1, member.member_id)
        assert errors == {("t", 0): NONE, ("t", 5): UNKNOWN_TOPIC, ("zz", 0): UNKNOWN_TOPIC}
        assert commit(client, "newgroup", {("t", 0): 1}, 3, "x") == {("t", 0): ILLEGAL_GENERATION}
        assert fetch(client, "g") == {("t", 0): 1}


def test_empty_and_oversized_group_ids_and_session_timeouts(tmp_path: Path) -> None:
    with group_broker(tmp_path) as broker, broker.connect() as client:
        create_topic(client, "t", 1)
        assert join(client, "").error_code == INVALID_GROUP_ID
        huge = "g" * 40_000
        assert join(client, huge).error_code == INVALID_GROUP_ID
        assert commit(client, huge, {("t", 0): 1}) == {("t", 0): INVALID_GROUP_ID}
        assert commit(client, "", {("t", 0): 3}) == {("t", 0): NONE}  # Kafka allows it
        assert fetch(client, "") == {("t", 0): 3}
        assert join(client, "g", session_timeout_ms=10).error_code == INVALID_SESSION_TIMEOUT
        too_long = join(client, "g", session_timeout_ms=1_800_001)
        assert too_long.error_code == INVALID_SESSION_TIMEOUT


def test_oversized_metadata_is_relayed_then_fails_to_store_without_harm(tmp_path: Path) -> None:
    with group_broker(tmp_path) as broker, broker.connect() as client:
        junk = bytes(range(256)) * 8192  # 2 MiB, not a consumer subscription at all
        offered = (JoinGroupProtocol("range", junk),)
        member = join(client, "g", offered=offered)
        assert member.error_code == NONE
        assert member.members[0].metadata == junk  # relayed untouched
        synced = sync(client, "g", member, {member.member_id: b"x"})
        assert synced.error_code == UNKNOWN_SERVER_ERROR  # the group record is too large
        assert client.call(ListGroupsRequest()).error_code == NONE


def test_a_group_at_its_max_size_refuses_new_members(tmp_path: Path) -> None:
    with group_broker(tmp_path, {"group.max.size": "1"}) as broker, broker.connect() as client:
        member = join(client, "g")
        sync(client, "g", member, {member.member_id: b""})
        with broker.connect() as other:
            refused = other.call(JoinGroupRequest("g", 10000, "consumer", protocols("t")))
            assert refused.error_code == GROUP_MAX_SIZE
        assert state(client, "g") == ("Stable", 1)


def test_a_batched_leave_answers_each_member(tmp_path: Path) -> None:
    with group_broker(tmp_path) as broker, broker.connect() as client:
        first = join(client, "g", instance="i-1")
        sync(client, "g", first, {first.member_id: b""})
        response = client.call(
            LeaveGroupRequest(
                "g", (LeavingMember("", "i-1"), LeavingMember("nobody"), LeavingMember("", "i-9"))
            )
        )
        assert [m.error for m in response.members] == [NONE, UNKNOWN_MEMBER, UNKNOWN_MEMBER]
        assert state(client, "g") == ("Empty", 0)


def test_list_groups_filters_by_state_and_offset_delete_spares_subscribed_topics(
    tmp_path: Path,
) -> None:
    with group_broker(tmp_path) as broker, broker.connect() as client:
        create_topic(client, "t", 1)
        create_topic(client, "u", 1)
        member = join(client, "active", offered=protocols("t"))
        sync(client, "active", member, {member.member_id: b""})
        commit(client, "idle", {("t", 0): 1})
        commit(client, "active", {("t", 0): 2, ("u", 0): 3}, 1, member.member_id)
        listed = client.call(ListGroupsRequest(("stable",))).groups
        assert [(g.group_id, g.group_state) for g in listed] == [("active", "Stable")]
        everything = client.call(ListGroupsRequest()).groups
        assert [g.group_id for g in everything] == ["active", "idle"]
        response = client.call(
            OffsetDeleteRequest("active", (GroupPartition("t", 0), GroupPartition("u", 0)))
        )
        assert response.error_code == NONE
        assert [p.error for p in response.partitions] == [SUBSCRIBED, NONE]
        assert fetch(client, "active") == {("t", 0): 2}


def test_a_member_whose_join_is_parked_outlives_its_session(tmp_path: Path) -> None:
    with group_broker(tmp_path) as broker, broker.connect() as a, broker.connect() as b:
        first = join(a, "g", session_timeout_ms=1500)
        sync(a, "g", first, {first.member_id: b""})
        # b's join waits for a, which never rejoins: 1.5 s, far past b's own 200 ms session
        second = join(b, "g", session_timeout_ms=200, rebalance_timeout_ms=5000)
        assert second.error_code == NONE
        assert second.generation_id == 2
        assert [m.member_id for m in second.members] == [second.member_id]


def test_lag_and_committed_offsets_are_exported_per_group_and_partition(tmp_path: Path) -> None:
    with group_broker(tmp_path) as broker, broker.connect() as client:
        create_topic(client, "t", 1)
        client.call(ProduceRequest((ProducePartitionData("t", 0, batch(10)),)))
        commit(client, "g", {("t", 0): 4})
        metrics = broker.metrics()
    labels = 'consumergroup="g",partition="0",topic="t"'
    assert metrics[f"kafka_consumergroup_current_offset{{{labels}}}"] == 4
    assert metrics[f"kafka_consumergroup_lag{{{labels}}}"] == 6
    assert metrics['kafka_consumergroup_lag_sum{consumergroup="g",topic="t"}'] == 6
    assert metrics['odradek_groups{state="Empty"}'] == 1
    assert metrics["odradek_group_offset_commit_seconds_count"] == 1


def test_refused_requests_under_many_group_ids_leave_no_groups_behind(tmp_path: Path) -> None:
    with group_broker(tmp_path) as broker, broker.connect() as client:
        for index in range(200):
            assert commit(client, f"g{index}", {("nope", 0): 1}) == {("nope", 0): UNKNOWN_TOPIC}
            bad = JoinGroupRequest(f"j{index}", 10000, "", protocols("t"))
            assert client.call(bad).error_code == INCONSISTENT_PROTOCOL
        assert client.call(ListGroupsRequest()).groups == ()
        assert broker.broker.group_coordinator.groups() == []


def test_followers_do_not_wait_for_ever_on_a_leader_that_never_syncs(tmp_path: Path) -> None:
    with group_broker(tmp_path) as broker, broker.connect() as a, broker.connect() as b:
        leader = join(a, "g", rebalance_timeout_ms=800)
        sync(a, "g", leader, {leader.member_id: b""})
        results = {}
        thread = threading.Thread(
            target=lambda: results.setdefault("b", join(b, "g", rebalance_timeout_ms=800))
        )
        thread.start()
        for _ in range(1000):
            if state(a, "g")[0] == "PreparingRebalance":
                break
        rejoined = join(a, "g", member_id=leader.member_id, rebalance_timeout_ms=800)
        thread.join(10)
        follower = results["b"]
        assert rejoined.generation_id == follower.generation_id == 2
        assert rejoined.leader == leader.member_id != follower.member_id
        # the leader goes quiet; the follower's SyncGroup is answered once 800 ms pass
        parked = sync(b, "g", follower)
        assert parked.error_code == REBALANCING
        beat = a.call(HeartbeatRequest("g", rejoined.generation_id, leader.member_id))
        assert beat.error_code == UNKNOWN_MEMBER


def test_joins_of_versions_before_4_need_no_member_id_round_trip(tmp_path: Path) -> None:
    """What Kafka's JoinGroup v0-v3 will call: the coordinator accepts a first join at once."""
    with group_broker(tmp_path) as broker:
        coordinator = broker.broker.group_coordinator
        result = broker.loop_thread.run(
            coordinator.join_group(
                "g",
                "",
                None,
                False,
                "old-client",
                "/127.0.0.1",
                -1,
                10000,
                "consumer",
                [("range", b"")],
            )
        )
    assert result.error.error_code == NONE
    assert result.member_id.startswith("old-client-")
    assert result.generation_id == 1


def test_a_leader_that_goes_silent_after_syncing_is_expired_and_the_rest_restabilise(
    tmp_path: Path,
) -> None:
    """What a stalled kafka-python leader did: it rejoined, synced the assignment, then sent
    nothing more. The coordinator expires it after its session, the two others learn it from
    their heartbeats, rejoin and form a Stable generation; the silent member's late leave
    finds it gone."""
    with (
        group_broker(tmp_path) as broker,
        broker.connect() as a,
        broker.connect() as b,
        broker.connect() as c,
        ThreadPoolExecutor(3) as pool,
    ):
        first = join(a, "g", session_timeout_ms=1000)
        sync(a, "g", first, {first.member_id: b"a"})
        joining = [pool.submit(join, client, "g") for client in (b, c)]
        # both joins parked before a rejoins, else a's rejoin may complete the round first
        wait_until(lambda: state(a, "g") == ("PreparingRebalance", 3))
        rejoined = join(a, "g", member_id=first.member_id, session_timeout_ms=1000)
        b_joined, c_joined = (future.result(10) for future in joining)
        assert rejoined.leader == first.member_id
        assert rejoined.generation_id == b_joined.generation_id == c_joined.generation_id == 2
        syncing = [pool.submit(sync, b, "g", b_joined), pool.submit(sync, c, "g", c_joined)]
        ids = [first.member_id, b_joined.member_id, c_joined.member_id]
        assert sync(a, "g", rejoined, {m: m.encode() for m in ids}).error_code == NONE
        assert [future.result(10).assignment for future in syncing] == [
            ids[1].encode(),
            ids[2].encode(),
        ]
        assert state(b, "g") == ("Stable", 3)

        # a goes silent; b and c heartbeat until told to rejoin (a's 1 s session ends)
        for client, joined in ((b, b_joined), (c, c_joined)):
            deadline = time.monotonic() + 30
            while True:
                beat = client.call(HeartbeatRequest("g", 2, joined.member_id))
                if beat.error_code != NONE or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            assert beat.error_code == REBALANCING
        joining = [
            pool.submit(join, client, "g", member_id=joined.member_id)
            for client, joined in ((b, b_joined), (c, c_joined))
        ]
        answers = [future.result(10) for future in joining]
        assert {answer.generation_id for answer in answers} == {3}
        leader = next(answer for answer in answers if answer.leader == answer.member_id)
        assert sorted(m.member_id for m in leader.members) == sorted(ids[1:])
        follower = next(answer for answer in answers if answer is not leader)
        leader_client = b if leader.member_id == ids[1] else c
        follower_client = c if leader_client is b else b
        waiting = pool.submit(sync, follower_client, "g", follower)
        assert sync(leader_client, "g", leader, {m: b"x" for m in ids[1:]}).error_code == NONE
        assert waiting.result(10).error_code == NONE
        assert state(b, "g") == ("Stable", 2)
        late = a.call(LeaveGroupRequest("g", (LeavingMember(first.member_id),)))
        assert late.members[0].error == UNKNOWN_MEMBER


def wait_for_state(client, group: str, wanted: str) -> None:
    for _ in range(200):
        if state(client, group)[0] == wanted:
            return
        time.sleep(0.02)
    raise AssertionError(f"group {group} never reached {wanted}: {state(client, group)}")


def test_a_heartbeat_of_an_old_generation_is_illegal_even_while_rebalancing(
    tmp_path: Path,
) -> None:
    """Kafka checks the generation before the state: during PreparingRebalance a member a
    generation behind gets ILLEGAL_GENERATION, a current one REBALANCE_IN_PROGRESS."""
    with (
        group_broker(tmp_path) as broker,
        broker.connect() as a,
        broker.connect() as b,
        ThreadPoolExecutor(1) as pool,
    ):
        first = join(a, "g")
        sync(a, "g", first, {first.member_id: b""})
        joining = pool.submit(join, b, "g")
        wait_for_state(a, "g", "PreparingRebalance")
        stale = a.call(HeartbeatRequest("g", first.generation_id - 1, first.member_id))
        current = a.call(HeartbeatRequest("g", first.generation_id, first.member_id))
        assert (stale.error_code, current.error_code) == (ILLEGAL_GENERATION, REBALANCING)
        join(a, "g", member_id=first.member_id)
        assert joining.result(10).generation_id == 2


def test_a_static_members_new_id_is_stored_even_if_its_join_request_goes_away(
    tmp_path: Path,
) -> None:
    """The rejoin of a static member is answered once its new member id is durable; the
    connection dropping meanwhile (its request handler cancelled) must not cancel that write,
    or a restart would bring the instance back under the id it had before."""
    with group_broker(tmp_path) as broker, broker.connect() as client:
        first = join(client, "g", instance="i-a")
        sync(client, "g", first, {first.member_id: b"a"})
        coordinator = broker.broker.group_coordinator

        async def rejoin_and_hang_up() -> None:
            request = asyncio.ensure_future(
                coordinator.join_group(
                    "g",
                    "",
                    "i-a",
                    True,
                    "c",
                    "/127.0.0.1",
                    10000,
                    10000,
                    "consumer",
                    [("range", protocols("t")[0].metadata)],
                )
            )
            await asyncio.sleep(0)  # the rejoin starts its write, then the client is gone
            request.cancel()
            await asyncio.gather(request, return_exceptions=True)

        broker.loop_thread.run(rejoin_and_hang_up())
        renamed = [
            m.member_id for m in client.call(DescribeGroupsRequest(("g",))).groups[0].members
        ]
        assert renamed != [first.member_id]
    with group_broker(tmp_path) as broker, broker.connect() as client:
        restored = [
            m.member_id for m in client.call(DescribeGroupsRequest(("g",))).groups[0].members
        ]
    assert restored == renamed
