"""A consume-transform-produce loop with librdkafka (confluent-kafka), exactly once: read
INPUT as a group member (read_committed), and for each poll of 1-10 records, in one
transaction, produce ``copy:`` + value to the same partition of OUTPUT and send the consumer's
positions to the transaction (send_offsets_to_transaction), then commit. It prints
``committed N`` (records so far) after each commit, flushed, and runs until killed; the
tests kill it with SIGKILL at random points and start it again.

Usage: python transactional_copy_process.py BOOTSTRAP INPUT OUTPUT GROUP TRANSACTIONAL_ID SEED
"""

from __future__ import annotations

import random
import sys

from confluent_kafka import Consumer, KafkaError, KafkaException, Producer


def main(bootstrap: str, source: str, output: str, group: str, txn_id: str, seed: str) -> None:
    rng = random.Random(seed)
    consumer = Consumer(
        {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.instance.id": f"{group}-member",  # a restart takes the member's place at once
            "session.timeout.ms": 6000,
            "heartbeat.interval.ms": 1000,
            "isolation.level": "read_committed",
            "enable.auto.commit": False,
            "auto.offset.reset": "earliest",
        }
    )
    producer = Producer({"bootstrap.servers": bootstrap, "transactional.id": txn_id})
    producer.init_transactions(60)
    consumer.subscribe([source])
    copied = 0
    while True:
        messages = [m for m in consumer.consume(rng.randint(1, 10), 0.5) if not m.error()]
        if not messages:
            continue
        producer.begin_transaction()
        for message in messages:
            producer.produce(output, b"copy:" + message.value(), partition=message.partition())
        try:
            producer.send_offsets_to_transaction(
                consumer.position(consumer.assignment()), consumer.consumer_group_metadata(), 60
            )
            producer.commit_transaction(60)
        except KafkaException as error:
            if not error.args[0].txn_requires_abort():
                raise
            producer.abort_transaction(60)
            _rewind(consumer)
            continue
        copied += len(messages)
        print(f"committed {copied}", flush=True)


def _rewind(consumer: Consumer) -> None:
    """After an abort: back to the committed offsets, to copy those records again."""
    committed = consumer.committed(consumer.assignment(), 60)
    for partition in committed:
        if partition.offset < 0:
            partition.offset = -2  # OFFSET_BEGINNING: nothing committed yet
        consumer.seek(partition)


if __name__ == "__main__":
    try:
        main(*sys.argv[1:])
    except KafkaException as error:
        code = error.args[0].code() if isinstance(error.args[0], KafkaError) else None
        print(f"failed {code} {error}", file=sys.stderr, flush=True)
        raise
