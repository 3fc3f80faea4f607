"""odradek's consumer in a group on a real broker: subscribe, rebalance, commit, resume."""

from __future__ import annotations

import time
from pathlib import Path

from group_helpers import group_broker

from odradek.client.admin import Admin, NewTopic
from odradek.client.consumer import Consumer
from odradek.client.consumer_rebalance_listener import ConsumerRebalanceListener
from odradek.client.producer import Producer
from odradek.topic_partition import TopicPartition


def produce(bootstrap: str, topic: str, count: int, partitions: int) -> None:
    with Producer(bootstrap_servers=bootstrap, linger_ms=0) as producer:
        for index in range(count):
            producer.send(topic, f"v{index}".encode(), partition=index % partitions)
        producer.flush()


def consumer(bootstrap: str, **configs: object) -> Consumer:
    configs.setdefault("group_id", "g")
    configs.setdefault("auto_offset_reset", "earliest")
    configs.setdefault("fetch_max_wait_ms", 50)
    configs.setdefault("session_timeout_ms", 2000)
    configs.setdefault("heartbeat_interval_ms", 100)
    return Consumer(bootstrap_servers=bootstrap, **configs)


def poll_values(c: Consumer, count: int, timeout_s: float = 20) -> list[bytes]:
    found: list[bytes] = []
    deadline = time.monotonic() + timeout_s
    while len(found) < count and time.monotonic() < deadline:
        found += [r.value for r in c.poll(100)]
    return found


def test_a_consumer_resumes_from_its_groups_committed_offsets(tmp_path: Path) -> None:
    with group_broker(tmp_path) as broker:
        with Admin(bootstrap_servers=broker.bootstrap) as admin:
            admin.create_topics([NewTopic("t", 2)])
        produce(broker.bootstrap, "t", 10, 2)
        with consumer(broker.bootstrap, enable_auto_commit=False) as first:
            first.subscribe(["t"])
            assert sorted(poll_values(first, 10)) == sorted(f"v{i}".encode() for i in range(10))
            assert first.assignment() == {TopicPartition("t", 0), TopicPartition("t", 1)}
            first.commit()
            assert first.committed(first.assignment()) == {
                TopicPartition("t", 0): 5,
                TopicPartition("t", 1): 5,
            }
            assert first.position(TopicPartition("t", 0)) == 5
        produce(broker.bootstrap, "t", 4, 2)
        with consumer(broker.bootstrap) as second:
            second.subscribe("^t$")
            assert sorted(poll_values(second, 4)) == [b"v0", b"v1", b"v2", b"v3"]


class Recorder(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.events: list[tuple[str, set[TopicPartition]]] = []

    def on_partitions_revoked(self, revoked: set[TopicPartition]) -> None:
        self.events.append(("revoked", revoked))

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        self.events.append(("assigned", assigned))


def test_a_second_member_takes_half_the_partitions_and_the_listener_hears_it(
    tmp_path: Path,
) -> None:
    with group_broker(tmp_path) as broker:
        with Admin(bootstrap_servers=broker.bootstrap) as admin:
            admin.create_topics([NewTopic("t", 4)])
        recorder = Recorder()
        with consumer(broker.bootstrap) as a, consumer(broker.bootstrap) as b:
            a.subscribe(["t"], recorder)
            a.poll(500)
            assert len(a.assignment()) == 4
            b.subscribe(["t"])
            # The assignment is visible before the listener is told of it (the member first
            # fetches the committed offsets): wait for both, the split and the listener hearing
            # the new assignment. Generous: a rebalance waits for a's rejoin, seconds on a
            # machine running two suites.
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline and not (
                len(a.assignment()) == 2 and len(b.assignment()) == 2 and len(recorder.events) >= 3
            ):
                a.poll(50)
                b.poll(50)
            assert a.assignment() | b.assignment() == {TopicPartition("t", p) for p in range(4)}
            assert not a.assignment() & b.assignment()
        kinds = [kind for kind, _ in recorder.events]
        assert kinds[:3] == ["assigned", "revoked", "assigned"]


def test_a_pattern_subscription_picks_up_a_new_topic_and_async_commits_land(
    tmp_path: Path,
) -> None:
    with group_broker(tmp_path) as broker:
        with Admin(bootstrap_servers=broker.bootstrap) as admin:
            admin.create_topics([NewTopic("logs-a", 1)])
        with consumer(broker.bootstrap, metadata_max_age_ms=200, enable_auto_commit=False) as c:
            c.subscribe("^logs-.*")
            deadline = time.monotonic() + 30  # a join and a metadata refresh: longer when busy
            while not c.assignment() and time.monotonic() < deadline:
                c.poll(300)
            assert c.assignment() == {TopicPartition("logs-a", 0)}
            with Admin(bootstrap_servers=broker.bootstrap) as admin:
                admin.create_topics([NewTopic("logs-b", 1)])
            produce(broker.bootstrap, "logs-b", 3, 1)
            assert poll_values(c, 3) == [b"v0", b"v1", b"v2"]
            assert c.subscription() == {"logs-a", "logs-b"}
            outcome: list[BaseException | None] = []
            c.commit_async(callback=outcome.append)
            deadline = time.monotonic() + 60
            while not outcome and time.monotonic() < deadline:
                time.sleep(0.01)
            assert outcome == [None]
            assert c.committed([TopicPartition("logs-b", 0)]) == {TopicPartition("logs-b", 0): 3}
