"""Consumer groups with real processes: a broker (``odradek serve``) and member processes
running odradek's own consumer. Membership changes, killed members, a killed broker."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
import serve_process
from group_helpers import commit, fetch
from serve_process import ServeProcess
from server_helpers import RawClient

from odradek.client.admin import Admin, NewTopic
from odradek.client.producer import Producer
from odradek.errors import KafkaError

MEMBER = Path(__file__).resolve().parent / "group_member_process.py"
TOPIC, PARTITIONS = "events", 6
BROKER_SETTINGS = (
    "--set",
    "group.initial.rebalance.delay.ms=0",
    "--set",
    "group.min.session.timeout.ms=100",
    "--set",
    "offsets.topic.num.partitions=3",
)


RUNNING: list[Member] = []
"""Every member process started, so a failed test leaves none behind."""


@pytest.fixture(autouse=True)
def _stop_members() -> Iterator[None]:
    yield
    while RUNNING:
        member = RUNNING.pop()
        if member.process.poll() is None:
            member.process.kill()
            member.process.wait(timeout=30)


class Member:
    """A member process and the JSON lines it reports."""

    def __init__(self, bootstrap: str, session_timeout_ms: int = 3000, pause_s: float = 0.02):
        command = [
            sys.executable,
            str(MEMBER),
            bootstrap,
            "g",
            TOPIC,
            str(session_timeout_ms),
            str(pause_s),
        ]
        env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.process = subprocess.Popen(command, stdout=subprocess.PIPE, text=True, env=env)
        RUNNING.append(self)
        self.events: list[dict] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        for line in self.process.stdout:
            self.events.append(json.loads(line))

    def assignments(self) -> list[tuple[int, list[int]]]:
        return [(e["generation"], e["partitions"]) for e in self.events if e["event"] == "assigned"]

    def current(self) -> list[int] | None:
        found = self.assignments()
        return found[-1][1] if found else None

    def consumed(self) -> set[tuple[int, int]]:
        return {tuple(r) for e in self.events if e["event"] == "consumed" for r in e["records"]}

    def stop(self, signum: int = signal.SIGTERM) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signum)
        self.process.wait(timeout=30)
        self._reader.join(timeout=5)


# Each wait returns as soon as its event happens; the bound is for a machine running another
# test suite beside this one (a member process starting and joining took over 40 s there).
def wait_for(condition, timeout_s: float = 120, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def produce(bootstrap: str, count: int, start: int = 0) -> None:
    """Records ``start`` .. ``count`` - 1, record i into partition i % PARTITIONS."""
    with Producer(bootstrap_servers=bootstrap, linger_ms=5) as producer:
        for index in range(start, count):
            producer.send(TOPIC, f"v{index}".encode(), partition=index % PARTITIONS)
        producer.flush()


def raw_client(port: int) -> RawClient:
    return RawClient(socket.create_connection(("127.0.0.1", port), timeout=30))


class CommitWatcher:
    """Reads the group's committed offsets over and over; records any that went back."""

    def __init__(self, port: int) -> None:
        self.backwards: list[tuple] = []
        self.latest: dict[tuple[str, int], int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, args=(port,), daemon=True)
        self._thread.start()

    def _watch(self, port: int) -> None:
        with raw_client(port) as client:
            while not self._stop.is_set():
                for key, offset in fetch(client, "g").items():
                    if offset < self.latest.get(key, -1):
                        self.backwards.append((key, self.latest[key], offset))
                    self.latest[key] = max(offset, self.latest.get(key, -1))
                time.sleep(0.02)

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=10)


def check_generations(members: list[Member]) -> None:
    """No partition is owned by two members in one generation."""
    owners: dict[int, dict[int, int]] = defaultdict(dict)
    for index, member in enumerate(members):
        for generation, partitions in member.assignments():
            for partition in partitions:
                other = owners[generation].setdefault(partition, index)
                assert other == index, f"partition {partition} owned twice in {generation}"


@pytest.mark.slow
def test_a_group_grows_to_three_members_and_shrinks_back(tmp_path: Path) -> None:
    total, held_back = 3000, 300
    with ServeProcess(tmp_path / "data", *BROKER_SETTINGS) as broker:
        with Admin(bootstrap_servers=broker.bootstrap) as admin:
            admin.create_topics([NewTopic(TOPIC, PARTITIONS)])
        produce(broker.bootstrap, total - held_back)
        watcher = CommitWatcher(broker.port)
        first = Member(broker.bootstrap)
        wait_for(lambda: first.current() == list(range(PARTITIONS)), what="first assignment")
        wait_for(lambda: len(first.consumed()) > 100, what="first records")
        second, third = Member(broker.bootstrap), Member(broker.bootstrap)
        members = [first, second, third]
        wait_for(lambda: all(len(m.current() or []) == 2 for m in members), what="3-way split")
        # The last records only now: under load the first member may have read everything
        # before the third joined, leaving it nothing to consume.
        produce(broker.bootstrap, total, start=total - held_back)
        wait_for(lambda: len(third.consumed()) > 0, what="third consumes")
        third.stop()
        wait_for(lambda: all(len(m.current() or []) == 3 for m in members[:2]), what="2-way")
        second.stop()
        wait_for(lambda: first.current() == list(range(PARTITIONS)), what="back to one")
        everything = {(i % PARTITIONS, i // PARTITIONS) for i in range(total)}
        wait_for(
            lambda: everything <= set().union(*(m.consumed() for m in members)),
            timeout_s=60,
            what="every record consumed",
        )
        wait_for(
            lambda: all(
                watcher.latest.get((TOPIC, p)) == total // PARTITIONS for p in range(PARTITIONS)
            ),
            what="final commits",
        )
        first.stop()
        watcher.stop()
    check_generations(members)
    assert not watcher.backwards
    generations = {g for m in members for g, _ in m.assignments()}
    assert len(generations) >= 4  # one member, three, two, one again


@pytest.mark.slow
def test_a_killed_members_partitions_move_after_its_session_timeout(tmp_path: Path) -> None:
    session_timeout_ms = 2000
    with ServeProcess(tmp_path / "data", *BROKER_SETTINGS) as broker:
        with Admin(bootstrap_servers=broker.bootstrap) as admin:
            admin.create_topics([NewTopic(TOPIC, PARTITIONS)])
        survivor = Member(broker.bootstrap, session_timeout_ms)
        wait_for(lambda: survivor.current() == list(range(PARTITIONS)), what="first assignment")
        victim = Member(broker.bootstrap, session_timeout_ms)
        wait_for(lambda: len(victim.current() or []) == 3, what="split")
        killed_at = time.monotonic()
        victim.stop(signal.SIGKILL)
        wait_for(lambda: survivor.current() == list(range(PARTITIONS)), what="takeover")
        waited = time.monotonic() - killed_at
        survivor.stop()
    assert waited >= session_timeout_ms / 1000 * 0.9
    check_generations([survivor, victim])


@pytest.mark.slow
def test_every_acknowledged_commit_survives_a_killed_broker(tmp_path: Path) -> None:
    data = tmp_path / "data"
    acknowledged = -1
    with ServeProcess(data, *BROKER_SETTINGS) as broker:
        with Admin(bootstrap_servers=broker.bootstrap) as admin:
            admin.create_topics([NewTopic(TOPIC, 2)])
        killer = threading.Timer(1.5, broker.process.send_signal, (signal.SIGKILL,))
        killer.start()
        try:
            with raw_client(broker.port) as client:
                for offset in range(1_000_000):
                    errors = commit(client, "g", {(TOPIC, 0): offset, (TOPIC, 1): offset})
                    assert set(errors.values()) == {0}, errors
                    acknowledged = offset
        except (ConnectionError, OSError, KafkaError):
            pass
        killer.join()
        broker.stop()
    assert acknowledged > 10
    with ServeProcess(data, *BROKER_SETTINGS) as broker, raw_client(broker.port) as client:
        committed = fetch(client, "g")
    # the commit in flight at the kill may or may not have become durable; nothing after it
    assert committed[(TOPIC, 0)] in (acknowledged, acknowledged + 1)
    assert committed[(TOPIC, 0)] == committed[(TOPIC, 1)]


@pytest.mark.slow
def test_a_member_rides_out_a_broker_restart(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    data = tmp_path / "data"
    ports = serve_process.free_ports(2)  # both brokers listen where the member connects
    monkeypatch.setattr(serve_process, "free_ports", lambda count: ports[:count])
    with ServeProcess(data, *BROKER_SETTINGS) as broker:
        with Admin(bootstrap_servers=broker.bootstrap) as admin:
            admin.create_topics([NewTopic(TOPIC, PARTITIONS)])
        produce(broker.bootstrap, 60)
        member = Member(broker.bootstrap)
        wait_for(lambda: len(member.consumed()) == 60, what="first records")
        broker.stop(signal.SIGKILL)
    with ServeProcess(data, *BROKER_SETTINGS) as broker:
        assert broker.port == ports[0]
        produce(broker.bootstrap, 60)  # offsets 10..19 of each partition
        everything = {(p, o) for p in range(PARTITIONS) for o in range(20)}
        wait_for(lambda: member.consumed() == everything, what="records after the restart")
        member.stop()
    assert member.process.returncode == 0
