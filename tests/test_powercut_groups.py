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
from server_helpers import RawClient

from odradek.protocol.offset_commit import OffsetCommitPartition, OffsetCommitRequest
from odradek.protocol.offset_fetch import OffsetFetchGroup, OffsetFetchRequest
from odradek.protocol.topics import CreatableTopic, CreateTopicsRequest
from tests.powercut_fs import PowerCutFS
from tests.powercut_helpers import CutTimer, mounted
from tests.serve_process import ServeProcess
from tests.test_powercut import SEED, cuts

TOPIC = "t"
PARTITIONS = 4
GROUPS = ("pc-a", "pc-b", "pc-c")  # three partitions of __consumer_offsets (of 3)
BROKER_SETTINGS = {
    "group.initial.rebalance.delay.ms": "0",
    "group.min.session.timeout.ms": "100",
    "offsets.topic.num.partitions": "3",
}

Partition = tuple[str, str, int]  # (group, topic, partition)


@pytest.fixture
def fs(tmp_path: Path):
    print(f"POWERCUT_SEED={SEED}")  # shown with a failure, to run it again
    powercut = mounted(tmp_path)
    try:
        yield powercut
    finally:
        powercut.stop()


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

    def commit(self, client: RawClient, rng: random.Random, **member: object) -> bool:
        """One OffsetCommit of a random group for some partitions, each at a new, higher
        offset; whether it was acknowledged (everywhere)."""
        group = rng.choice(GROUPS)
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
            **member,  # type: ignore[arg-type]
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
                    while not stop.is_set() and ledger.commit(client, rng):
                        pass

            with CutTimer(commit_until_cut) as workload:
                time.sleep(rng.uniform(0.2, 1.2))
                fs.cut(abandon=lambda: (broker.stop(signal.SIGKILL), workload.join()))  # noqa: B023
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
