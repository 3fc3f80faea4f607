"""Power cuts at random instants under committed offsets (``__consumer_offsets``), on the
power-cut file system (tests/powercut_fs.py): an acknowledged commit survives, a commit never
goes back behind one, and what is read back is always an offset that was sent, with its own
metadata.

``odradek serve`` runs as a real process on the FUSE mount and is killed with the power; a
client commits offsets for its groups in a loop while the cut comes. Every round starts the
broker again on the same data directory, so the topic's creation, its recovery after earlier
cuts and (in the second scenario) its compaction and the groups' membership records are cut
too. ``POWERCUT_CUTS`` scales the cuts and ``POWERCUT_SEED`` varies them, as in
tests/test_powercut.py.
"""

from __future__ import annotations

import random
import signal
import socket
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from group_helpers import join, sync
from server_helpers import RawClient

from odradek.protocol.consumer_protocol import Assignment
from odradek.protocol.offset_commit import OffsetCommitPartition, OffsetCommitRequest
from odradek.protocol.offset_fetch import OffsetFetchGroup, OffsetFetchRequest
from odradek.protocol.topics import CreatableTopic, CreateTopicsRequest
from tests.powercut_fs import PowerCutFS
from tests.powercut_helpers import SEED, CutTimer, powercut_fs  # noqa: F401
from tests.serve_process import ServeProcess
from tests.test_powercut import cuts

TOPIC = "t"
PARTITIONS = 4
GROUPS = ("pc-a", "pc-b", "pc-c")  # three partitions of __consumer_offsets (of 3)
BROKER_SETTINGS = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "100",
    "offsets.topic.num.partitions": "3",
}

Partition = tuple[str, str, int]  # (group, topic, partition)


def serve(fs: PowerCutFS, settings: dict[str, str]) -> ServeProcess:
    args = [arg for name, value in settings.items() for arg in ("--set", f"{name}={value}")]
    return ServeProcess(fs.mount / "data", *args)


def connect(broker: ServeProcess) -> RawClient:
    return RawClient(socket.create_connection(("127.0.0.1", broker.port), timeout=10))


def metadata_of(offset: int, size: int) -> str:
    """The metadata committed with ``offset``: names it, so a value read back with another
    offset's metadata (or torn) shows."""
    return f"m{offset}:".ljust(size, "x")


@dataclass
class CommitLedger:
    """Per (group, topic, partition): every offset sent (increasing) and the floor a
    committed offset may not fall below (the last acknowledged commit, or what the last
    recovery found)."""

    metadata_size: int
    sent: dict[Partition, list[int]] = field(default_factory=dict)
    floor: dict[Partition, int] = field(default_factory=dict)
    next_offset: int = 0
    acked_commits: int = 0

    def check(self, client: RawClient, where: str) -> None:
        """What the broker serves after a cut: per partition, an offset sent with its own
        metadata, not below the floor; then that offset is the new floor (it is durable: the
        power-cut file system kept it)."""
        for group in GROUPS:
            found = fetch_committed(client, group)
            for (topic, partition), (offset, metadata) in found.items():
                key = (group, topic, partition)
                assert offset in self.sent.get(key, ()), (
                    f"{where}: {key} committed at {offset}, an offset never sent"
                )
                assert metadata == metadata_of(offset, self.metadata_size), (
                    f"{where}: {key} at {offset} has another commit's metadata"
                )
            for key, floor in self.floor.items():
                if key[0] != group:
                    continue
                offset = found.get(key[1:], (-1, None))[0]
                assert offset >= floor, (
                    f"{where}: {key} committed at {offset}, behind the acknowledged {floor}"
                )
            for (topic, partition), (offset, _) in found.items():
                self.floor[(group, topic, partition)] = offset

    def commit(
        self,
        client: RawClient,
        rng: random.Random,
        group: str,
        generation_id: int = -1,
        member_id: str = "",
    ) -> bool:
        """One OffsetCommit of ``group`` (as the member given, if any) for some partitions,
        each at a new, higher offset; whether it was acknowledged (everywhere)."""
        partitions = rng.sample(range(PARTITIONS), rng.randint(1, PARTITIONS))
        offsets = {}
        for partition in partitions:
            self.next_offset += rng.randint(1, 50)
            offsets[(TOPIC, partition)] = self.next_offset
            self.sent.setdefault((group, TOPIC, partition), []).append(self.next_offset)
        request = OffsetCommitRequest(
            group,
            tuple(
                OffsetCommitPartition(t, p, o, -1, metadata_of(o, self.metadata_size))
                for (t, p), o in offsets.items()
            ),
            generation_id,
            member_id,
        )
        response = client.call(request)
        if any(r.error != 0 for r in response.partitions):
            return False  # the power is going: nothing from now on is acknowledged
        for (topic, partition), offset in offsets.items():
            self.floor[(group, topic, partition)] = offset
        self.acked_commits += 1
        return True


def fetch_committed(client: RawClient, group: str) -> dict[tuple[str, int], tuple[int, str]]:
    """The committed offset and metadata of each partition ``group`` has one for."""
    response = client.call(OffsetFetchRequest((OffsetFetchGroup(group),)))
    entry = response.groups[0]
    assert entry.error == 0, entry
    return {
        (p.topic, p.partition): (p.committed_offset, p.metadata)
        for p in entry.partitions
        if p.committed_offset >= 0
    }


def create_topic(client: RawClient) -> None:
    response = client.call(CreateTopicsRequest((CreatableTopic(TOPIC, PARTITIONS),)))
    assert response.topics[0].error in (0, 36), response  # 36: it survived an earlier cut


@pytest.mark.slow
def test_acknowledged_commits_survive_power_cuts_of_a_broker_process(fs: PowerCutFS) -> None:
    """A client commits offsets (several partitions, three groups, with metadata) as fast as
    the broker acknowledges them; the power goes at a random instant. After each restart
    every partition's committed offset is one that was sent, with its metadata, at or past
    the last acknowledged commit; the rounds share one data directory, so later cuts also
    land on a topic recovered from earlier ones."""
    rng = random.Random(SEED + 2521)
    ledger = CommitLedger(metadata_size=64)
    for cut in range(cuts(5)):
        broker = serve(fs, BROKER_SETTINGS)
        try:
            with connect(broker) as client:
                if cut == 0:
                    create_topic(client)
                else:
                    ledger.check(client, f"cut {cut}")

            def commit_until_cut(stop, broker=broker) -> None:
                with connect(broker) as client:
                    while not stop.is_set() and ledger.commit(client, rng, rng.choice(GROUPS)):
                        pass

            with CutTimer(commit_until_cut) as workload:
                time.sleep(rng.uniform(0.2, 1.2))
                fs.cut(
                    keep_unsynced=rng.choice([0.0, 0.0, 0.5, 1.0]),  # torn pages now and then
                    seed=rng.randrange(1 << 30),
                    abandon=lambda: (broker.stop(signal.SIGKILL), workload.join()),  # noqa: B023
                )
        finally:
            broker.stop(signal.SIGKILL)
    broker = serve(fs, BROKER_SETTINGS)
    try:
        with connect(broker) as client:
            ledger.check(client, "after the last cut")
    finally:
        broker.stop()
    print(f"{ledger.acked_commits} commits acknowledged over {fs.cuts} cuts")
    assert ledger.acked_commits > 0


COMPACTING_SETTINGS = {
    **BROKER_SETTINGS,
    "offsets.topic.segment.bytes": str(1 << 20),  # the floor; metadata of 3 KB fills it
    "log.cleaner.backoff.ms": "50",
    "log.cleaner.min.cleanable.ratio": "0.05",
    "log.cleaner.dedupe.buffer.size": str(1 << 20),
}


ASSIGNMENT = Assignment({TOPIC: tuple(range(PARTITIONS))}).to_bytes()


@dataclass
class Membership:
    """One member of a group, as far as the client knows: its id and the generations it was
    given (by JoinGroup) and confirmed in (by SyncGroup, answered once the group's record
    is durable)."""

    group: str
    member_id: str = ""
    joined_generation: int = 0
    synced_generation: int = 0

    def rebalance(self, client: RawClient) -> bool:
        """Rejoin (a leader's rejoin starts a new generation) and sync the assignment;
        whether both were answered without error."""
        joined = join(client, self.group, member_id=self.member_id)
        if joined.error_code != 0:
            return False
        self.member_id = joined.member_id
        self.joined_generation = max(self.joined_generation, joined.generation_id)
        synced = sync(client, self.group, joined, {joined.member_id: ASSIGNMENT})
        if synced.error_code != 0:
            return False
        self.synced_generation = joined.generation_id
        return True

    def check(self, client: RawClient, where: str) -> None:
        """After a cut: the member the last acknowledged SyncGroup stored is still there, in
        a generation from the last acknowledged one to the last one handed out; rejoining
        starts the next one."""
        if not self.member_id:
            return
        before = self.synced_generation
        joined = join(client, self.group, member_id=self.member_id)
        assert joined.error_code == 0, (
            f"{where}: member {self.member_id} of {self.group} is gone: {joined}"
        )
        assert before < joined.generation_id <= self.joined_generation + 1, (
            f"{where}: {self.group} rejoined in generation {joined.generation_id}; "
            f"generation {before} was acknowledged, {self.joined_generation} handed out"
        )
        self.joined_generation = joined.generation_id
        synced = sync(client, self.group, joined, {joined.member_id: ASSIGNMENT})
        assert synced.error_code == 0, f"{where}: {self.group} cannot sync: {synced}"
        self.synced_generation = joined.generation_id


def cleaned_offsets(data: Path) -> dict[str, int]:
    """The cleaner's checkpoint: how far it cleaned each partition."""
    path = data / "cleaner-offset-checkpoint"
    if not path.exists():
        return {}
    lines = path.read_text().splitlines()[2:]
    return {
        f"{topic}-{partition}": int(offset) for topic, partition, offset in map(str.split, lines)
    }


@pytest.mark.slow
def test_commits_and_group_records_survive_power_cuts_while_the_cleaner_compacts_them(
    fs: PowerCutFS,
) -> None:
    """As above, with each group a member that rebalances now and then (JoinGroup, SyncGroup:
    a GroupMetadata record each) and commits as that member with 3 KB of metadata, so
    __consumer_offsets rolls 1 MiB segments and the cleaner compacts them (and swaps its
    segments in) while the power goes. After each cut the offsets hold as above, and the
    member the last acknowledged SyncGroup stored rejoins, in a generation at or past it."""
    rng = random.Random(SEED + 2522)
    ledger = CommitLedger(metadata_size=3000)
    members = {group: Membership(group) for group in GROUPS}
    cleaned_before_cuts = []  # what the cleaner's checkpoint said after each cut
    for cut in range(cuts(4)):
        cleaned_before_cuts.append(sum(cleaned_offsets(fs.mount / "data").values()))
        broker = serve(fs, COMPACTING_SETTINGS)
        try:
            with connect(broker) as client:
                if cut == 0:
                    create_topic(client)
                else:
                    ledger.check(client, f"cut {cut}")
                    for member in members.values():
                        member.check(client, f"cut {cut}")
                for member in members.values():
                    if not member.member_id:
                        assert member.rebalance(client)

            # Some rounds mostly rebalance, so cuts often fall just after a SyncGroup.
            rebalancing = rng.choice([0.05, 0.5])

            def work_until_cut(stop, broker=broker, rebalancing=rebalancing) -> None:
                with connect(broker) as client:
                    while not stop.is_set():
                        member = members[rng.choice(GROUPS)]
                        if rng.random() < rebalancing:
                            done = member.rebalance(client)
                        else:
                            done = ledger.commit(
                                client,
                                rng,
                                member.group,
                                member.synced_generation,
                                member.member_id,
                            )
                        if not done:
                            return

            with CutTimer(work_until_cut) as workload:
                time.sleep(rng.uniform(0.5, 2.5))
                fs.cut(
                    keep_unsynced=rng.choice([0.0, 0.0, 0.5, 1.0]),
                    seed=rng.randrange(1 << 30),
                    abandon=lambda: (broker.stop(signal.SIGKILL), workload.join()),  # noqa: B023
                )
        finally:
            broker.stop(signal.SIGKILL)
    cleaned: dict[str, int] = {}
    broker = serve(fs, COMPACTING_SETTINGS)
    try:
        with connect(broker) as client:
            ledger.check(client, "after the last cut")
            for member in members.values():
                member.check(client, "after the last cut")
            # The cuts may have come before a segment rolled or the cleaner ran (on a loaded
            # machine the rounds commit little): commit on until the cleaner has compacted
            # __consumer_offsets, the event this waits for, within a bound far above it.
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                cleaned = cleaned_offsets(fs.mount / "data")
                if any(name.startswith("__consumer_offsets") for name in cleaned):
                    break
                member = members[rng.choice(GROUPS)]
                if rng.random() < 0.05:  # as the rounds do; and within the session timeout
                    assert member.rebalance(client), "a rebalance failed with the power on"
                    continue
                assert ledger.commit(
                    client, rng, member.group, member.synced_generation, member.member_id
                ), "a commit failed with the power on"
            ledger.check(client, "after the cleaner compacted")
    finally:
        broker.stop()
    generations = {member.group: member.synced_generation for member in members.values()}
    print(
        f"{ledger.acked_commits} commits acknowledged over {fs.cuts} cuts; generations "
        f"{generations}; cleaned up to (after each cut) {cleaned_before_cuts}, at the end {cleaned}"
    )
    assert any(name.startswith("__consumer_offsets") for name in cleaned), "never compacted"


def test_a_static_members_new_id_is_durable_before_its_rejoin_is_answered(
    fs: PowerCutFS,
) -> None:
    """Regression: a static member rejoining a Stable group under a new member id was
    answered at once and its new id stored in the background; after a power cut in between
    the instance came back under its old id, fencing the member holding the new one. Now,
    as in Kafka, the rejoin is answered once the new id is durable; with the file system
    frozen it cannot be, and the member is told to find the coordinator again."""
    broker = serve(fs, BROKER_SETTINGS)
    try:
        with connect(broker) as client:
            create_topic(client)
            first = join(client, "pc-static", instance="pc-instance")
            assert first.error_code == 0, first
            assert sync(client, "pc-static", first, {first.member_id: ASSIGNMENT}).error_code == 0
        answers = []

        def rejoin_frozen() -> None:
            with connect(broker) as client:
                answers.append(join(client, "pc-static", instance="pc-instance"))
            broker.stop(signal.SIGKILL)

        fs.cut(abandon=rejoin_frozen)
    finally:
        broker.stop(signal.SIGKILL)
    (rejoined,) = answers
    assert rejoined.error_code != 0, (
        f"a new member id nothing could store was acknowledged: {rejoined}"
    )
    broker = serve(fs, BROKER_SETTINGS)
    try:
        with connect(broker) as client:
            again = join(client, "pc-static", member_id=first.member_id, instance="pc-instance")
            assert again.error_code == 0, f"the durable member id was lost: {again}"
    finally:
        broker.stop()
