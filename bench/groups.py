"""Consumer groups: durable commit rate, rebalance time, start-up with many committed offsets.
Prints figures, asserts nothing.

1. Commits per second, each answered only once fsync'ed: one committer, then ``--committers``
   (50) at once, each in its own simple (generation -1) group (so spread over the offsets
   topic's partitions, each with its own fsyncs), then all in one group (one partition, whose
   group commit shares fsyncs), committing one offset over and over for ``--seconds`` against
   ``odradek serve`` in a child process.
2. Rebalance time of a 3-member group: two odradek consumers are stable, a third subscribes;
   the time until all three hold their share (join + sync + the members noticing by
   heartbeat); then the time until the two left hold everything after one leaves.
3. Start-up with ``--offsets`` (1,000,000) committed offsets in ``__consumer_offsets``: written
   straight into the topic's logs in Kafka's layout, then a broker started on them; prints the
   time the coordinator took to rebuild its state and the whole start.

Usage: ``.venv/bin/python bench/groups.py [--seconds 5] [--committers 50] [--offsets 1000000]``
"""

from __future__ import annotations

import argparse
import asyncio
import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from odradek.client.admin import Admin, NewTopic
from odradek.client.config import ClientConfig
from odradek.client.consumer import Consumer
from odradek.client.event_loop_thread import EventLoopThread
from odradek.client.network_client import NetworkClient
from odradek.config.broker_config_loader import load_broker_config
from odradek.protocol.offset_commit import OffsetCommitPartition, OffsetCommitRequest
from odradek.record.record_batch_builder import RecordBatchBuilder
from odradek.server.broker import Broker
from odradek.server.group.coordinator_records import OffsetCommitKey, OffsetCommitValue
from odradek.topic_partition import TopicPartition

GROUP_SETTINGS = ["group.initial.rebalance.delay.ms=0", "group.min.session.timeout.ms=500"]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def serve(data_dir: Path) -> tuple[subprocess.Popen[bytes], str]:
    port, metrics_port = free_port(), free_port()
    command = [
        sys.executable,
        "-m",
        "odradek.cli.main",
        "serve",
        "--data-dir",
        str(data_dir),
        "--port",
        str(port),
        "--metrics-port",
        str(metrics_port),
    ]
    for setting in GROUP_SETTINGS:
        command += ["--set", setting]
    process = subprocess.Popen(command, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return process, f"127.0.0.1:{port}"
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise SystemExit("the broker did not start")


async def commit_loop(bootstrap: str, group: str, deadline: float, counts: list[int]) -> None:
    client = NetworkClient(ClientConfig(bootstrap_servers=bootstrap))
    offset = 0
    try:
        while time.monotonic() < deadline:
            request = OffsetCommitRequest(group, (OffsetCommitPartition("bench", 0, offset),))
            response = await client.send(request)
            assert response.partitions[0].error == 0, response
            offset += 1
        counts.append(offset)
    finally:
        await client.close()


def commit_rate(bootstrap: str, committers: int, seconds: float, shared: bool = False) -> float:
    """Commits per second of ``committers`` each in its own group (spread over the offsets
    topic's partitions), or all in one group (one partition: they share its fsyncs)."""

    async def run() -> int:
        counts: list[int] = []
        deadline = time.monotonic() + seconds
        groups = [
            f"bench-shared-{committers}" if shared else f"bench-{committers}-{i}"
            for i in range(committers)
        ]
        await asyncio.gather(*(commit_loop(bootstrap, g, deadline, counts) for g in groups))
        return sum(counts)

    started = time.monotonic()
    total = asyncio.run(run())
    return total / (time.monotonic() - started)


def rebalance_times(bootstrap: str) -> tuple[float, float]:
    def member() -> Consumer:
        consumer = Consumer(
            bootstrap_servers=bootstrap,
            group_id="bench-rebalance",
            session_timeout_ms=3000,
            heartbeat_interval_ms=100,
            fetch_max_wait_ms=20,
        )
        consumer.subscribe(["bench"])
        return consumer

    def settle(members: list[Consumer], each: int) -> float:
        started = time.monotonic()
        while not all(len(m.assignment()) == each for m in members):
            for m in members:
                m.poll(5)
        return time.monotonic() - started

    first, second = member(), member()
    settle([first, second], 3)
    third = member()
    join_s = settle([first, second, third], 2)
    third.close()
    leave_s = settle([first, second], 3)
    first.close()
    second.close()
    return join_s, leave_s


def startup_with_offsets(offsets: int) -> tuple[float, float, int]:
    with tempfile.TemporaryDirectory() as directory:
        overrides = {"log.dirs": directory, "port": "0", "metrics.port": "0"}
        config = load_broker_config(overrides=overrides)
        thread = EventLoopThread(name="bench-broker")
        broker = thread.call(Broker, config)
        thread.run(broker.start(), timeout=60)
        manager = broker.log_manager
        broker.group_coordinator_log.topic.create()
        groups = max(offsets // 1000, 1)
        now = int(time.time() * 1000)
        written = 0
        for group_index in range(groups):
            group = f"group-{group_index}"
            builder = RecordBatchBuilder()
            for partition in range(offsets // groups):
                key = OffsetCommitKey(group, "topic", partition).to_bytes()
                builder.append(now, key, OffsetCommitValue(partition, -1, "", now).to_bytes())
                written += 1
            tp = TopicPartition(
                "__consumer_offsets", broker.group_coordinator_log.topic.partition_for(group)
            )
            manager.get_log(tp).append(builder.build())
        thread.run(broker.stop(), timeout=120)
        started = time.monotonic()
        broker = thread.call(Broker, config)
        thread.run(broker.start(), timeout=600)
        total_s = time.monotonic() - started
        load_s = broker.group_metrics.load_seconds
        loaded = broker.group_metrics.loaded_offsets
        thread.run(broker.stop(), timeout=120)
        return load_s, total_s, loaded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--committers", type=int, default=50)
    parser.add_argument("--offsets", type=int, default=1_000_000)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as directory:
        process, bootstrap = serve(Path(directory) / "data")
        try:
            with Admin(bootstrap_servers=bootstrap) as admin:
                admin.create_topics([NewTopic("bench", 6)])
            one = commit_rate(bootstrap, 1, args.seconds)
            many = commit_rate(bootstrap, args.committers, args.seconds)
            shared = commit_rate(bootstrap, args.committers, args.seconds, shared=True)
            print(f"durable commits/s, 1 committer:                 {one:8.0f}")
            print(f"durable commits/s, {args.committers} committers, own groups: {many:8.0f}")
            print(f"durable commits/s, {args.committers} committers, one group:  {shared:8.0f}")
            join_s, leave_s = rebalance_times(bootstrap)
            print(f"3-member group, a third joins:  {join_s * 1000:6.0f} ms until all hold 2 of 6")
            print(f"3-member group, one leaves:     {leave_s * 1000:6.0f} ms until two hold 3 of 6")
        finally:
            process.send_signal(signal.SIGTERM)
            process.wait(timeout=60)
    load_s, total_s, loaded = startup_with_offsets(args.offsets)
    print(
        f"start-up with {loaded} committed offsets: groups rebuilt in {load_s:.2f} s, "
        f"whole start {total_s:.2f} s"
    )
    print(f"(cpu count {os.cpu_count()}; figures of one run on a shared machine)")


if __name__ == "__main__":
    main()
