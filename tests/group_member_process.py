"""A consumer group member as its own process, for the group tests: it subscribes, reports
every assignment and every record it consumes as JSON lines on stdout, commits what it
consumed after each poll, and leaves the group on SIGTERM.

Usage: python group_member_process.py BOOTSTRAP GROUP TOPIC SESSION_TIMEOUT_MS POLL_PAUSE_S
"""

from __future__ import annotations

import json
import logging
import signal
import sys
import time

from odradek.client.consumer import Consumer
from odradek.client.consumer_rebalance_listener import ConsumerRebalanceListener
from odradek.topic_partition import TopicPartition


def report(**fields: object) -> None:
    sys.stdout.write(json.dumps(fields) + "\n")
    sys.stdout.flush()


class Reporter(ConsumerRebalanceListener):
    def __init__(self) -> None:
        self.consumer: Consumer | None = None

    def on_partitions_assigned(self, assigned: set[TopicPartition]) -> None:
        metadata = self.consumer.group_metadata()
        partitions = sorted(p.partition for p in assigned)
        report(event="assigned", generation=metadata.generation_id, partitions=partitions)


def main() -> None:
    logging.basicConfig(
        level=logging.INFO, format="%(asctime)s member %(levelname)s %(name)s: %(message)s"
    )
    bootstrap, group, topic, session_timeout_ms, pause_s = sys.argv[1:6]
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    reporter = Reporter()
    consumer = Consumer(
        bootstrap_servers=bootstrap,
        group_id=group,
        auto_offset_reset="earliest",
        enable_auto_commit=False,
        session_timeout_ms=int(session_timeout_ms),
        heartbeat_interval_ms=max(int(session_timeout_ms) // 5, 50),
        max_poll_records=20,
        fetch_max_wait_ms=50,
    )
    reporter.consumer = consumer
    consumer.subscribe([topic], reporter)
    report(event="started")
    while not stopping:
        records = consumer.poll(100)
        if records:
            report(event="consumed", records=[[r.partition, r.offset] for r in records])
            try:
                consumer.commit()
            except Exception as error:  # a rebalance refused it: the next owner re-reads
                report(event="commit_failed", error=str(error))
        time.sleep(float(pause_s))
    consumer.close()
    report(event="closed")


if __name__ == "__main__":
    main()
