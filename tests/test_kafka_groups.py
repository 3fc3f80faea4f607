"""Consumer groups on Kafka's protocol with Kafka's own clients: confluent-kafka (commit and
resume; cooperative-sticky; a member killed; admin), kafka-python, aiokafka, kcat's balanced
consumer, and odradek's own consumer sharing a group with librdkafka. Groups growing to three
members and shrinking back, for every client, are in test_group_grow_shrink.py."""

from __future__ import annotations

import asyncio
import shutil
import subprocess
import tempfile
import threading
import time

import confluent_kafka
import pytest
from confluent_kafka import ConsumerGroupTopicPartitions
from confluent_kafka.admin import AdminClient
from group_scenario import (
    FAST_GROUP,
    ConfluentMember,
    Ownership,
    assert_partitioned,
    committed,
    produce,
    stable_assignment,
    wait_until,
)
from kafka_helpers import create_topic
from server_helpers import RunningBroker, running_broker

GROUP_SETTINGS = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "3"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> RunningBroker:
    with running_broker(tmp_path_factory.mktemp("kafka-groups"), GROUP_SETTINGS) as running:
        yield running


def test_confluent_commit_and_committed_and_a_restart_resumes(broker: RunningBroker) -> None:
    topic, group = "commit-resume", "commit-resume-group"
    create_topic(broker.bootstrap, topic, 2)
    produce(broker, topic, 2, 10)
    settings = {
        "bootstrap.servers": broker.bootstrap,
        "group.id": group,
        "auto.offset.reset": "earliest",
        "enable.auto.commit": False,
        **FAST_GROUP,
    }
    first = confluent_kafka.Consumer(settings)
    first.subscribe([topic])
    seen = []
    wait_until(
        lambda: seen.extend(m for m in first.consume(10, 0.2) if not m.error()) or len(seen) >= 10,
        "10 records",
    )
    offsets = [
        confluent_kafka.TopicPartition(topic, 0, 3),
        confluent_kafka.TopicPartition(topic, 1, 5),
    ]
    first.commit(offsets=offsets, asynchronous=False)
    found = first.committed([confluent_kafka.TopicPartition(topic, p) for p in (0, 1)], 10)
    assert [(tp.partition, tp.offset) for tp in found] == [(0, 3), (1, 5)]
    first.close()
    second = confluent_kafka.Consumer(settings)
    second.subscribe([topic])
    again: list = []
    wait_until(
        lambda: (
            again.extend(m for m in second.consume(10, 0.2) if not m.error()) or len(again) >= 2
        ),
        "records after the committed offsets",
    )
    second.close()
    assert sorted((m.partition(), m.offset()) for m in again) == [(0, 3), (0, 4)]


def test_cooperative_sticky_moves_only_what_it_must(broker: RunningBroker) -> None:
    topic, group, partitions = "cooperative", "cooperative-group", 4
    create_topic(broker.bootstrap, topic, partitions)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    ownership = Ownership()
    produced = produce(broker, topic, partitions, 40)
    strategy = {"partition.assignment.strategy": "cooperative-sticky"}
    first = ConfluentMember("coop-a", broker, topic, group, ownership, **strategy)
    first.start()
    second = None
    try:
        wait_until(lambda: first.assignment == set(range(partitions)), "all partitions on one")
        second = ConfluentMember("coop-b", broker, topic, group, ownership, **strategy)
        second.start()

        def covering() -> dict[str, set] | None:
            # Cooperative: the generation that revokes from the first member is Stable without
            # the revoked partitions; the next one assigns them.
            found = stable_assignment(admin, group, 2)
            return found if found and sum(map(len, found.values())) >= partitions else None

        assert_partitioned(wait_until(covering, "two members holding every partition"), partitions)
        wait_until(lambda: len(first.assignment) == len(second.assignment) == 2, "2 and 2")
        assert first.assignment.isdisjoint(second.assignment)
        produced |= produce(broker, topic, partitions, 40)
        wait_until(lambda: produced <= ownership.consumed, "every record consumed")
        second.stop()
        second = None
        wait_until(lambda: first.assignment == set(range(partitions)), "all back on one")
    finally:
        for member in (first, second):
            if member is not None:
                member.stop()
    assert ownership.violations == []


def test_kafka_python_consumers_share_a_group_and_commit(broker: RunningBroker) -> None:
    from kafka import KafkaConsumer, TopicPartition
    from kafka.errors import IllegalStateError

    topic, group, partitions = "kafka-python-group", "kafka-python-group", 4
    create_topic(broker.bootstrap, topic, partitions)
    produced = produce(broker, topic, partitions, 40)
    ends = {p: 1 + max(o for q, o in produced if q == p) for p in range(partitions)}

    def member() -> KafkaConsumer:
        consumer = KafkaConsumer(
            bootstrap_servers=broker.bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            heartbeat_interval_ms=300,
            session_timeout_ms=6000,
        )
        consumer.subscribe([topic])
        # the partitions known before the first JoinGroup (see group_scenario.KafkaPythonMember)
        assert topic in consumer.topics()
        return consumer

    consumers = [member(), member()]
    try:
        consumed: set[tuple] = set()
        # each member's partitions and its position in each (what its commit writes), as its
        # own polling thread last saw them: what anyone consumed says nothing of a member given,
        # in a rebalance, partitions another consumed before
        positions: list[dict[int, int]] = [{}, {}]
        lock = threading.Lock()
        stopping = threading.Event()

        def poll(index: int) -> None:  # each member polls in its own thread
            consumer = consumers[index]
            while not stopping.is_set():
                for records in consumer.poll(100).values():
                    with lock:
                        consumed.update((r.partition, r.offset) for r in records)
                try:
                    at = {tp.partition: consumer.position(tp, 1000) for tp in consumer.assignment()}
                except IllegalStateError:  # a rebalance took a partition meanwhile
                    continue
                with lock:
                    positions[index] = at

        threads = [threading.Thread(target=poll, args=(i,), daemon=True) for i in range(2)]
        for thread in threads:
            thread.start()

        def split() -> bool:
            """The partitions split between the two, each owner at the end of what it owns, and
            every record consumed."""
            with lock:
                done = produced <= consumed
                owned = [set(at) for at in positions]
                at_end = all(at[p] == ends[p] for at in positions for p in at)
            every = set(range(partitions))
            return (
                done
                and at_end
                and all(owned)
                and not owned[0] & owned[1]
                and owned[0] | owned[1] == every
            )

        try:
            wait_until(split, "the two splitting the partitions, each at the end of its own", 120)
        finally:
            stopping.set()
            for thread in threads:
                thread.join(10)
        assert consumers[0].assignment() | consumers[1].assignment() == {
            TopicPartition(topic, p) for p in range(partitions)
        }
        for consumer in consumers:
            consumer.commit()
        committed = {p: consumers[0].committed(TopicPartition(topic, p)) for p in range(partitions)}
        assert committed == ends
    finally:  # a consumer left open goes on running its threads in this worker
        for consumer in consumers:
            consumer.close()


def test_aiokafka_consumer_group_commits(broker: RunningBroker) -> None:
    from aiokafka import AIOKafkaConsumer, TopicPartition

    topic, group = "aiokafka-group", "aiokafka-group"
    create_topic(broker.bootstrap, topic, 2)
    produced = produce(broker, topic, 2, 20)

    async def run() -> tuple[set, dict]:
        consumer = AIOKafkaConsumer(
            topic,
            bootstrap_servers=broker.bootstrap,
            group_id=group,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            heartbeat_interval_ms=300,
            session_timeout_ms=6000,
        )
        await consumer.start()
        consumed: set[tuple] = set()
        try:
            deadline = time.monotonic() + 60
            while not produced <= consumed and time.monotonic() < deadline:
                batches = await consumer.getmany(timeout_ms=200)
                for records in batches.values():
                    consumed.update((r.partition, r.offset) for r in records)
            await consumer.commit()
            found = {p: await consumer.committed(TopicPartition(topic, p)) for p in (0, 1)}
        finally:
            await consumer.stop()
        return consumed, found

    consumed, found = asyncio.run(run())
    assert produced <= consumed
    assert found == {0: 10, 1: 10}


@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_kcat_balanced_consumer_reads_and_commits(broker: RunningBroker) -> None:
    topic, group = "kcat-group", "kcat-group"
    create_topic(broker.bootstrap, topic, 3)
    produce(broker, topic, 3, 30)
    result = subprocess.run(
        [
            "kcat",
            "-b",
            broker.bootstrap,
            "-G",
            group,
            "-X",
            "auto.offset.reset=earliest",
            "-e",
            "-q",
            "-f",
            "%p %o\n",
            topic,
        ],
        capture_output=True,
        text=True,
        timeout=90,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    seen = {tuple(map(int, line.split())) for line in result.stdout.split("\n") if line}
    assert seen == {(p, o) for p in range(3) for o in range(10)}
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    assert committed(admin, group) == {0: 10, 1: 10, 2: 10}


def test_odradek_and_librdkafka_consumers_share_one_group(broker: RunningBroker) -> None:
    """Both speak Kafka's consumer protocol ("consumer", range): one group, one assignment."""
    from odradek.client.consumer import Consumer

    topic, group, partitions = "mixed-group", "mixed-group", 4
    create_topic(broker.bootstrap, topic, partitions)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    ownership = Ownership()
    produced = produce(broker, topic, partitions, 40)
    kafka_member = ConfluentMember(
        "librdkafka", broker, topic, group, ownership, **{"partition.assignment.strategy": "range"}
    )
    kafka_member.start()
    own = Consumer(
        bootstrap_servers=broker.bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        heartbeat_interval_ms=300,
        session_timeout_ms=6000,
        partition_assignment_strategy="range",
    )
    try:
        own.subscribe([topic])

        def settled() -> dict | None:
            ownership.add({(r.partition, r.offset) for r in own.poll(100)})
            found = stable_assignment(admin, group, 2)
            mine = {tp.partition for tp in own.assignment()}
            theirs = kafka_member.assignment
            # Each client's own view too: librdkafka takes its share in its callback, a
            # moment after the group is Stable, so until then it may still hold them all.
            if (
                found is None
                or not mine
                or mine | theirs != set(range(partitions))
                or not mine.isdisjoint(theirs)
            ):
                return None
            return found

        assignment = wait_until(settled, "both members in one Stable generation")
        assert_partitioned(assignment, partitions)
        wait_until(lambda: settled() and produced <= ownership.consumed, "every record read")
        own.commit()
    finally:
        own.close()
        kafka_member.stop()
    assert ownership.violations == []


def test_confluent_admin_alters_lists_and_deletes_group_offsets(broker: RunningBroker) -> None:
    from confluent_kafka import TopicPartition

    topic, group = "admin-groups", "admin-groups"
    create_topic(broker.bootstrap, topic, 2)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    offsets = [TopicPartition(topic, 0, 4), TopicPartition(topic, 1, 9)]
    request = ConsumerGroupTopicPartitions(group, offsets)
    altered = admin.alter_consumer_group_offsets([request])[group].result(timeout=10)
    assert [(tp.partition, tp.offset, tp.error) for tp in altered.topic_partitions] == [
        (0, 4, None),
        (1, 9, None),
    ]
    assert committed(admin, group) == {0: 4, 1: 9}
    listed = admin.list_consumer_groups().result(timeout=10)
    assert group in {g.group_id for g in listed.valid}
    admin.delete_consumer_groups([group])[group].result(timeout=10)
    listed = admin.list_consumer_groups().result(timeout=10)
    assert group not in {g.group_id for g in listed.valid}
    assert committed(admin, group) == {}


MEMBER_PROCESS = """
import sys, confluent_kafka
consumer = confluent_kafka.Consumer({
    "bootstrap.servers": sys.argv[1], "group.id": sys.argv[2], "session.timeout.ms": 6000,
    "heartbeat.interval.ms": 300, "enable.auto.commit": False})
consumer.subscribe([sys.argv[3]], on_assign=lambda c, parts: print(
    "assigned", len(parts), flush=True))
while True:
    consumer.poll(0.1)
"""


def test_a_killed_member_s_partitions_move_after_its_session_timeout(
    broker: RunningBroker,
) -> None:
    import os
    import signal
    import sys

    topic, group, partitions = "killed-member", "killed-member-group", 4
    create_topic(broker.bootstrap, topic, partitions)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    ownership = Ownership()
    survivor = ConfluentMember("survivor", broker, topic, group, ownership)
    survivor.start()
    victim = subprocess.Popen(
        [sys.executable, "-c", MEMBER_PROCESS, broker.bootstrap, group, topic],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(lambda: stable_assignment(admin, group, 2), "two members")
        wait_until(lambda: len(survivor.assignment) == 2, "the survivor holding half")
        os.kill(victim.pid, signal.SIGKILL)
        victim.wait(10)
        killed_at = time.monotonic()
        wait_until(lambda: survivor.assignment == set(range(partitions)), "all on the survivor")
        moved_after = time.monotonic() - killed_at
        assert_partitioned(
            wait_until(lambda: stable_assignment(admin, group, 1), "one member"), partitions
        )
    finally:
        if victim.poll() is None:
            victim.kill()
            victim.wait(10)
        survivor.stop()
    assert 3 < moved_after < 30, moved_after  # the 6 s session timeout, not at once
    assert ownership.violations == []


def test_kafka_python_admin_manages_group_offsets(broker: RunningBroker) -> None:
    from kafka import KafkaAdminClient, TopicPartition
    from kafka.errors import NoError
    from kafka.structs import OffsetAndMetadata

    topic, group = "kp-admin", "kp-admin-group"
    create_topic(broker.bootstrap, topic, 2)
    admin = KafkaAdminClient(bootstrap_servers=broker.bootstrap)
    try:
        partition = TopicPartition(topic, 0)
        altered = admin.alter_group_offsets(group, {partition: OffsetAndMetadata(5, "m", -1)})
        assert altered == {partition: NoError}
        listed = admin.list_group_offsets({group: None})[group]
        assert (listed[partition].offset, listed[partition].metadata) == (5, "m")
        empty = admin.list_groups(states_filter=["Empty"])
        assert {"group_id": group, "protocol_type": "", "group_state": "Empty"} in empty
        described = admin.describe_groups([group], include_authorized_operations=True)[group]
        assert (described["group_state"], described["error"]) == ("Empty", None)
        # Without an authorizer, every operation a group supports (Kafka's AclEntry).
        assert sorted(described["authorized_operations"]) == [
            "ALTER_CONFIGS",
            "DELETE",
            "DESCRIBE",
            "DESCRIBE_CONFIGS",
            "READ",
        ]
        assert admin.delete_group_offsets(group, [partition]) == {partition: NoError}
        assert admin.list_group_offsets({group: None})[group] == {}
        assert admin.delete_groups([group]) == {group: "OK"}
    finally:
        admin.close()


def test_two_aiokafka_consumers_split_a_topic(broker: RunningBroker) -> None:
    from aiokafka import AIOKafkaConsumer

    topic, group, partitions = "aiokafka-pair", "aiokafka-pair", 4
    create_topic(broker.bootstrap, topic, partitions)
    produced = produce(broker, topic, partitions, 40)

    async def run() -> tuple[set, list[set]]:
        consumers = [
            AIOKafkaConsumer(
                topic,
                bootstrap_servers=broker.bootstrap,
                group_id=group,
                auto_offset_reset="earliest",
                enable_auto_commit=False,
                heartbeat_interval_ms=300,
                session_timeout_ms=6000,
            )
            for _ in range(2)
        ]
        for consumer in consumers:
            await consumer.start()
        consumed: set[tuple] = set()
        owned: list[set] = [set(), set()]
        try:
            deadline = time.monotonic() + 60
            while time.monotonic() < deadline:
                for consumer in consumers:
                    for records in (await consumer.getmany(timeout_ms=100)).values():
                        consumed.update((r.partition, r.offset) for r in records)
                owned = [{tp.partition for tp in c.assignment()} for c in consumers]
                if produced <= consumed and all(owned) and not owned[0] & owned[1]:
                    break
        finally:
            for consumer in consumers:
                await consumer.stop()
        return consumed, owned

    consumed, owned = asyncio.run(run())
    assert produced <= consumed
    assert owned[0] | owned[1] == set(range(partitions)) and not owned[0] & owned[1], owned


@pytest.mark.slow
@pytest.mark.reference_kafka
def test_a_java_consumer_asking_for_the_new_group_protocol_is_told_to_use_classic(
    broker: RunningBroker,
) -> None:
    """ConsumerGroupHeartbeat (KIP-848) is not advertised: Kafka's Java consumer set to
    group.protocol=consumer stops with its own clear message instead of waiting."""
    from kafka_reference import HARNESS_MAIN, harness_classpath

    topic = "java-new-protocol"
    create_topic(broker.bootstrap, topic, 1)
    command = ["java", "-Xmx128m", "-cp", harness_classpath(), HARNESS_MAIN, "group-consume"]
    command += ["--bootstrap", broker.bootstrap, "--topic", topic]
    command += ["--property", "group.id=java-new-protocol", "--property", "group.protocol=consumer"]
    # stdin stays open: the member runs until the client gives up by itself
    with tempfile.TemporaryFile("w+") as stderr:
        member = subprocess.Popen(
            command, stdin=subprocess.PIPE, stdout=subprocess.DEVNULL, stderr=stderr, text=True
        )
        try:
            code = member.wait(60)
        finally:
            if member.poll() is None:
                member.kill()
                member.wait(10)
            assert member.stdin is not None
            member.stdin.close()
        stderr.seek(0)
        errors = stderr.read()
    assert code != 0
    assert "does not support the new CONSUMER group protocol" in errors, errors[-2000:]
    assert "group.protocol=classic" in errors
