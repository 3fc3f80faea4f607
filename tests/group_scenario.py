"""One consumer-group scenario for every client: a group grows from 1 to 3 members and shrinks
back, against a broker in the test process.

Each client is a :class:`GroupMember`: it subscribes under its own client id, reports what its
rebalance listener is given and takes away (:class:`Ownership`) and the records it reads, and
commits what it read. :func:`grow_and_shrink` checks, for every generation the group reaches
(1, 2, 3, 2, 1 members): DescribeGroups shows it Stable with every partition assigned to
exactly one member, and each member's listener agrees with it; no partition is ever given to
a member while another still holds it; every record produced is consumed at least once; the
committed offsets, sampled all along, never go backwards and end at the log end offsets.
"""

from __future__ import annotations

import itertools
import json
import re
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

import confluent_kafka
from confluent_kafka import ConsumerGroupTopicPartitions, KafkaException
from confluent_kafka.admin import AdminClient
from kafka_helpers import create_topic
from server_helpers import RunningBroker

FAST_GROUP = {"session.timeout.ms": 6000, "heartbeat.interval.ms": 300}
PARTITIONS = 6


def wait_until(condition: Callable[[], Any], what: str, timeout_s: float = 60) -> Any:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        found = condition()
        if found:
            return found
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def produce(broker: RunningBroker, topic: str, partitions: int, count: int) -> set[tuple]:
    """``count`` records spread over the partitions; their (partition, offset)s."""
    producer = confluent_kafka.Producer({"bootstrap.servers": broker.bootstrap, "linger.ms": 5})
    delivered: set[tuple] = set()

    def on_delivery(error: object, message: confluent_kafka.Message) -> None:
        assert error is None, error
        delivered.add((message.partition(), message.offset()))

    for index in range(count):
        producer.produce(
            topic, value=b"v%d" % index, partition=index % partitions, on_delivery=on_delivery
        )
    assert producer.flush(30) == 0
    return delivered


def committed(admin: AdminClient, group: str) -> dict[int, int]:
    request = ConsumerGroupTopicPartitions(group)
    result = admin.list_consumer_group_offsets([request])[group].result(timeout=10)
    return {tp.partition: tp.offset for tp in result.topic_partitions if tp.offset >= 0}


def stable_assignment(admin: AdminClient, group: str, members: int) -> dict[str, set] | None:
    """Each member's partitions (by member id) once the group is Stable with ``members``."""
    found = _stable_members(admin, group, members)
    return None if found is None else {m.member_id: parts for m, parts in found}


def stable_by_client(admin: AdminClient, group: str, members: int) -> dict[str, set] | None:
    """Each member's partitions by client id once the group is Stable with ``members``."""
    found = _stable_members(admin, group, members)
    return None if found is None else {m.client_id: parts for m, parts in found}


def _stable_members(admin: AdminClient, group: str, members: int) -> list[tuple] | None:
    description = admin.describe_consumer_groups([group])[group].result(timeout=10)
    if description.state != confluent_kafka.ConsumerGroupState.STABLE:
        return None
    if len(description.members) != members:
        return None
    return [
        (m, {tp.partition for tp in m.assignment.topic_partitions}) for m in description.members
    ]


def assert_partitioned(assignment: dict[str, set], partitions: int) -> None:
    """Every partition owned by exactly one member."""
    owned = [p for parts in assignment.values() for p in parts]
    assert sorted(owned) == list(range(partitions)), assignment


class Ownership:
    """Which member holds which partitions, as the clients' rebalance listeners say, and the
    records they read. Events carry the time they happened (a member in another process
    stamps its own); replayed in time order, a partition given to a member while another
    still holds it is a violation."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.events: list[tuple[float, int, str, bool, frozenset[int]]] = []
        self.consumed: set[tuple] = set()
        self._sequence = itertools.count()

    def assigned(self, member: str, partitions: Iterable[int], at: float | None = None) -> None:
        self._record(member, True, partitions, at)

    def revoked(self, member: str, partitions: Iterable[int], at: float | None = None) -> None:
        self._record(member, False, partitions, at)

    def _record(
        self, member: str, gained: bool, partitions: Iterable[int], at: float | None
    ) -> None:
        when = time.time() if at is None else at
        with self.lock:
            self.events.append((when, next(self._sequence), member, gained, frozenset(partitions)))

    def released(self, member: str) -> None:
        """``member`` stopped reading: whatever it held it no longer uses (a client may close
        without telling its listener)."""
        with self.lock:
            held = set().union(*(e[4] for e in self.events if e[2] == member))
        self._record(member, False, held, None)

    def add(self, records: set[tuple]) -> None:
        with self.lock:
            self.consumed |= records

    def _replay(self) -> tuple[dict[str, set[int]], list[str]]:
        with self.lock:
            events = sorted(self.events)
        owned: dict[str, set[int]] = {}
        violations = []
        for _, _, member, gained, partitions in events:
            held = owned.setdefault(member, set())
            if not gained:
                held -= partitions
                continue
            for other, theirs in owned.items():
                if other != member and theirs & partitions:
                    violations.append(f"{member} got {set(theirs & partitions)} held by {other}")
            held |= partitions
        return owned, violations

    @property
    def owned(self) -> dict[str, set[int]]:
        return self._replay()[0]

    @property
    def violations(self) -> list[str]:
        return self._replay()[1]


class CommitWatch(threading.Thread):
    """Samples the group's committed offsets; records any that went backwards."""

    def __init__(self, admin: AdminClient, group: str) -> None:
        super().__init__(daemon=True)
        self.admin, self.group = admin, group
        self.stopping = threading.Event()
        self.latest: dict[int, int] = {}
        self.backwards: list[str] = []
        self.samples = 0

    def run(self) -> None:
        while not self.stopping.is_set():
            self._sample()
            time.sleep(0.1)

    def _sample(self) -> None:
        for partition, offset in committed(self.admin, self.group).items():
            if offset < self.latest.get(partition, -1):
                self.backwards.append(
                    f"partition {partition}: {self.latest[partition]} -> {offset}"
                )
            self.latest[partition] = max(offset, self.latest.get(partition, -1))
        self.samples += 1

    def stop(self) -> None:
        """Stop sampling, after one last sample (the thread may have stopped before seeing the
        final commits the scenario waited for)."""
        self.stopping.set()
        self.join(10)
        self._sample()


class GroupMember(threading.Thread):
    """A subscribed consumer polled in its own thread, committing after every poll that read
    records; ``name`` is its client id. Subclasses open, poll, commit and close a client."""

    def __init__(self, name: str, ownership: Ownership) -> None:
        super().__init__(name=name, daemon=True)
        self.ownership = ownership
        self.stopping = threading.Event()
        self.failure: BaseException | None = None

    def run(self) -> None:
        try:
            while not self.stopping.is_set():
                records = self.poll()
                self.ownership.add(records)
                if records:
                    self.commit()
            self.ownership.released(self.name)
            self.close()
        except BaseException as failure:  # noqa: BLE001 - reported by the test
            self.failure = failure

    def poll(self) -> set[tuple]:
        raise NotImplementedError

    def commit(self) -> None:
        """Commit what was read; a commit a rebalance refuses is let go (re-read later)."""
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        self.stopping.set()
        self.join(30)
        assert not self.is_alive() and self.failure is None, (self.name, self.failure)


class ConfluentMember(GroupMember):
    """librdkafka (confluent-kafka)."""

    def __init__(
        self,
        name: str,
        broker: RunningBroker,
        topic: str,
        group: str,
        ownership: Ownership,
        **config: Any,
    ) -> None:
        super().__init__(name, ownership)
        self.assignment: set[int] = set()
        self.consumer = confluent_kafka.Consumer(
            {
                "bootstrap.servers": broker.bootstrap,
                "group.id": group,
                "client.id": name,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                **FAST_GROUP,
                **config,
            }
        )
        self.consumer.subscribe(
            [topic], on_assign=self._on_assign, on_revoke=self._on_revoke, on_lost=self._on_revoke
        )

    def _on_assign(self, consumer: confluent_kafka.Consumer, partitions: list) -> None:
        self.ownership.assigned(self.name, [tp.partition for tp in partitions])

    def _on_revoke(self, consumer: confluent_kafka.Consumer, partitions: list) -> None:
        self.ownership.revoked(self.name, [tp.partition for tp in partitions])

    def poll(self) -> set[tuple]:
        messages = self.consumer.consume(100, 0.1)
        self.assignment = {tp.partition for tp in self.consumer.assignment()}
        return {(m.partition(), m.offset()) for m in messages if not m.error()}

    def commit(self) -> None:
        try:
            self.consumer.commit(asynchronous=False)
        except KafkaException:
            pass

    def close(self) -> None:
        self.consumer.close()


class KafkaPythonMember(GroupMember):
    """kafka-python's KafkaConsumer."""

    def __init__(
        self, name: str, broker: RunningBroker, topic: str, group: str, ownership: Ownership
    ) -> None:
        from kafka import ConsumerRebalanceListener, KafkaConsumer

        super().__init__(name, ownership)

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked: Any) -> None:
                ownership.revoked(name, [tp.partition for tp in revoked])

            def on_partitions_assigned(self, assigned: Any) -> None:
                ownership.assigned(name, [tp.partition for tp in assigned])

        self.consumer = KafkaConsumer(
            bootstrap_servers=broker.bootstrap,
            group_id=group,
            client_id=name,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            heartbeat_interval_ms=300,
            session_timeout_ms=6000,
        )
        self.consumer.subscribe([topic], listener=Listener())
        # Learn the topic's partitions before the first JoinGroup. kafka-python 3.0's leader
        # that assigned without them rejoins once they arrive, and when that JoinGroup outlasts
        # a poll and the new assignment makes the partitions known, poll() stops driving the
        # join it has in flight: the member never heartbeats again and its session expires.
        assert topic in self.consumer.topics()

    def poll(self) -> set[tuple]:
        batches = self.consumer.poll(100)
        return {(r.partition, r.offset) for rs in batches.values() for r in rs}

    def commit(self) -> None:
        from kafka.errors import CommitFailedError, KafkaError

        try:
            self.consumer.commit()
        except (CommitFailedError, KafkaError):
            pass

    def close(self) -> None:
        self.consumer.close()


class AiokafkaMember(GroupMember):
    """aiokafka's AIOKafkaConsumer, on an event loop of its own in this thread."""

    def __init__(
        self, name: str, broker: RunningBroker, topic: str, group: str, ownership: Ownership
    ) -> None:
        super().__init__(name, ownership)
        self.bootstrap, self.topic, self.group = broker.bootstrap, topic, group

    def run(self) -> None:
        import asyncio

        try:
            asyncio.run(self._run())
        except BaseException as failure:  # noqa: BLE001 - reported by the test
            self.failure = failure

    async def _run(self) -> None:
        from aiokafka import AIOKafkaConsumer, ConsumerRebalanceListener
        from aiokafka.errors import CommitFailedError, KafkaError

        name, ownership = self.name, self.ownership

        class Listener(ConsumerRebalanceListener):
            async def on_partitions_revoked(self, revoked: Any) -> None:
                ownership.revoked(name, [tp.partition for tp in revoked])

            async def on_partitions_assigned(self, assigned: Any) -> None:
                ownership.assigned(name, [tp.partition for tp in assigned])

        consumer = AIOKafkaConsumer(
            bootstrap_servers=self.bootstrap,
            group_id=self.group,
            client_id=name,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            heartbeat_interval_ms=300,
            session_timeout_ms=6000,
        )
        await consumer.start()
        consumer.subscribe([self.topic], listener=Listener())
        try:
            while not self.stopping.is_set():
                batches = await consumer.getmany(timeout_ms=100)
                records = {(r.partition, r.offset) for rs in batches.values() for r in rs}
                ownership.add(records)
                if records:
                    try:
                        await consumer.commit()
                    except (CommitFailedError, KafkaError):
                        pass
        finally:
            ownership.released(name)
            await consumer.stop()


class OdradekMember(GroupMember):
    """odradek's own Consumer (its msgpack protocol, on the same listener)."""

    def __init__(
        self, name: str, broker: RunningBroker, topic: str, group: str, ownership: Ownership
    ) -> None:
        from odradek.client.consumer import Consumer
        from odradek.client.consumer_rebalance_listener import ConsumerRebalanceListener

        super().__init__(name, ownership)

        class Listener(ConsumerRebalanceListener):
            def on_partitions_revoked(self, revoked: Any) -> None:
                ownership.revoked(name, [tp.partition for tp in revoked])

            def on_partitions_assigned(self, assigned: Any) -> None:
                ownership.assigned(name, [tp.partition for tp in assigned])

        self.consumer = Consumer(
            bootstrap_servers=broker.bootstrap,
            group_id=group,
            client_id=name,
            auto_offset_reset="earliest",
            enable_auto_commit=False,
            heartbeat_interval_ms=300,
            session_timeout_ms=6000,
        )
        self.consumer.subscribe([topic], Listener())

    def poll(self) -> set[tuple]:
        return {(r.partition, r.offset) for r in self.consumer.poll(100)}

    def commit(self) -> None:
        from odradek.errors import KafkaError

        try:
            self.consumer.commit()
        except KafkaError:
            pass

    def close(self) -> None:
        self.consumer.close()


class ProcessMember:
    """A group member in a child process whose output a reader thread follows."""

    def __init__(self, name: str, ownership: Ownership, command: list[str]) -> None:
        self.name, self.ownership = name, ownership
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            bufsize=1,
        )
        self.output: list[str] = []
        self.errors: list[str] = []
        self._readers = [
            threading.Thread(target=self._follow, args=(self.process.stdout, self.on_stdout)),
            threading.Thread(target=self._follow, args=(self.process.stderr, self.on_stderr)),
        ]

    def start(self) -> None:
        for reader in self._readers:
            reader.daemon = True
            reader.start()

    @staticmethod
    def _follow(stream: Any, handle: Callable[[str], None]) -> None:
        for line in stream:
            handle(line.rstrip("\n"))

    def on_stdout(self, line: str) -> None:
        self.output.append(line)

    def on_stderr(self, line: str) -> None:
        self.errors.append(line)

    def end(self) -> None:
        """Ask the process to leave the group and exit."""
        raise NotImplementedError

    def stop(self) -> None:
        if self.process.poll() is None:
            self.end()
        try:
            code = self.process.wait(30)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait(10)
            raise AssertionError(f"{self.name} did not exit: {self.errors[-20:]}") from None
        for reader in self._readers:
            reader.join(10)
        assert code == 0, (self.name, code, self.errors[-20:])


_KCAT_REBALANCE = re.compile(r"rebalanced \(memberid [^)]*\): (assigned|revoked): (.*)$")


class KcatMember(ProcessMember):
    """kcat's balanced consumer (-G, librdkafka underneath): it auto-commits what it printed
    every 200 ms and on exit; it says what it was assigned and revoked on stderr (-v)."""

    def __init__(
        self, name: str, broker: RunningBroker, topic: str, group: str, ownership: Ownership
    ) -> None:
        settings = {
            "client.id": name,
            "auto.offset.reset": "earliest",
            "auto.commit.interval.ms": 200,
            "partition.assignment.strategy": "range",
            **FAST_GROUP,
        }
        command = ["kcat", "-b", broker.bootstrap, "-G", group, "-v", "-u", "-f", "%p %o\n"]
        for key, value in settings.items():
            command += ["-X", f"{key}={value}"]
        super().__init__(name, ownership, [*command, topic])

    def on_stdout(self, line: str) -> None:
        partition, offset = line.split()
        self.ownership.add({(int(partition), int(offset))})

    def on_stderr(self, line: str) -> None:
        super().on_stderr(line)
        found = _KCAT_REBALANCE.search(line)
        if found:
            partitions = [int(p) for p in re.findall(r"\[(\d+)\]", found[2])]
            if found[1] == "assigned":
                self.ownership.assigned(self.name, partitions)
            else:
                self.ownership.revoked(self.name, partitions)

    def end(self) -> None:
        self.process.send_signal(signal.SIGTERM)


class JavaMember(ProcessMember):
    """Kafka's Java consumer (kafka-clients 4.x, classic protocol) through the harness's
    group-consume command: it reports its listener's calls and its records as JSON lines."""

    def __init__(
        self,
        name: str,
        broker: RunningBroker,
        topic: str,
        group: str,
        ownership: Ownership,
        classpath: str,
    ) -> None:
        settings = {
            "group.id": group,
            "client.id": name,
            "group.protocol": "classic",
            "partition.assignment.strategy": ("org.apache.kafka.clients.consumer.RangeAssignor"),
            **FAST_GROUP,
        }
        command = ["java", "-Xmx128m", "-XX:TieredStopAtLevel=1", "-cp", classpath]
        command += ["io.odradek.harness.KafkaHarness", "group-consume"]
        command += ["--bootstrap", broker.bootstrap, "--topic", topic]
        for key, value in settings.items():
            command += ["--property", f"{key}={value}"]
        super().__init__(name, ownership, command)

    def on_stdout(self, line: str) -> None:
        super().on_stdout(line)
        if not line.startswith("{"):
            return
        event = json.loads(line)
        at = event.get("at", time.time() * 1000) / 1000
        if "assigned" in event:
            self.ownership.assigned(self.name, event["assigned"], at)
        elif "revoked" in event or "lost" in event:
            self.ownership.revoked(self.name, event.get("revoked", event.get("lost")), at)
        elif "records" in event:
            self.ownership.add({(p, o) for p, o in event["records"]})

    def end(self) -> None:
        assert self.process.stdin is not None
        self.process.stdin.close()


MemberFactory = Callable[[str, str, str, Ownership], Any]
"""(name, topic, group, ownership) -> a started-able member with start() and stop()."""


def grow_and_shrink(
    broker: RunningBroker, label: str, member: MemberFactory, per_round: int = 60
) -> None:
    """The scenario of the module docstring, with members ``member`` makes."""
    topic, group, partitions = f"{label}-grow-shrink", f"{label}-grow-shrink-group", PARTITIONS
    create_topic(broker.bootstrap, topic, partitions)
    admin = AdminClient({"bootstrap.servers": broker.bootstrap})
    ownership = Ownership()
    watch = CommitWatch(admin, group)
    produced = produce(broker, topic, partitions, per_round)
    members: list[Any] = []
    watch.start()

    def settled(size: int) -> dict[str, set] | None:
        """The Stable generation of ``size`` members, once every listener agrees with it."""
        found = stable_by_client(admin, group, size)
        if found is None or set(found) != {m.name for m in members}:
            return None
        owned = ownership.owned
        if any(owned.get(name, set()) != parts for name, parts in found.items()):
            return None
        return found

    def settle(size: int) -> None:
        try:
            assignment = wait_until(lambda: settled(size), f"{label}: {size} members settled")
        except AssertionError as timeout:
            description = admin.describe_consumer_groups([group])[group].result(timeout=10)
            seen = [
                (m.client_id, sorted(tp.partition for tp in m.assignment.topic_partitions))
                for m in description.members
            ]
            said = {m.name: getattr(m, "errors", [])[-5:] for m in members}
            raise AssertionError(
                f"{timeout}: the group is {description.state} with {seen}; the listeners say "
                f"{ownership.owned}; the members' last errors {said}"
            ) from None
        assert_partitioned(assignment, partitions)
        assert all(assignment.values()), assignment  # range spreads 6 partitions over all

    try:
        for size in (1, 2, 3):
            members.append(member(f"{label}-{size}", topic, group, ownership))
            members[-1].start()
            settle(size)
            if size == 1:
                wait_until(lambda: produced <= ownership.consumed, f"{label}: first records")
        produced |= produce(broker, topic, partitions, per_round)
        wait_until(lambda: produced <= ownership.consumed, f"{label}: records read by three")
        for size in (2, 1):
            members.pop().stop()
            settle(size)
        produced |= produce(broker, topic, partitions, per_round)
        wait_until(lambda: produced <= ownership.consumed, f"{label}: records after shrinking")
        ends = {p: 1 + max(o for q, o in produced if q == p) for p in range(partitions)}
        wait_until(lambda: committed(admin, group) == ends, f"{label}: every record committed")
    finally:
        for running in members:
            running.stop()
        watch.stop()
    violations = ownership.violations
    assert violations == []
    assert watch.backwards == [] and watch.samples > 5
    assert watch.latest == ends
