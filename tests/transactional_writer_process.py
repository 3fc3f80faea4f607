"""Transactions one after another (librdkafka, confluent-kafka) until killed or failed, for the
broker-crash test: transaction N writes ``N-0`` .. ``N-5`` round the partitions of TOPIC and
commits, or aborts when N % 4 == 3. It prints ``committed N`` or ``aborted N`` once the
broker answered the end, flushed; it exits on the first error (the test starts it again, with
the next N: the same transactional id fences what its predecessor left open).

Usage: python transactional_writer_process.py BOOTSTRAP TOPIC PARTITIONS FIRST_N
"""

from __future__ import annotations

import sys

from confluent_kafka import Producer

RECORDS = 6


def main(bootstrap: str, topic: str, partitions: str, first: str) -> None:
    producer = Producer(
        {
            "bootstrap.servers": bootstrap,
            "transactional.id": "crash-writer",
            "transaction.timeout.ms": 5000,
            "message.timeout.ms": 5000,
        }
    )
    producer.init_transactions(30)
    number = int(first)
    while True:
        print(f"begin {number}", flush=True)
        producer.begin_transaction()
        for record in range(RECORDS):
            value = f"{number}-{record}".encode()
            producer.produce(topic, value, partition=record % int(partitions))
        if number % 4 == 3:
            producer.flush(10)
            producer.abort_transaction(10)
            print(f"aborted {number}", flush=True)
        else:
            producer.commit_transaction(10)
            print(f"committed {number}", flush=True)
        number += 1


if __name__ == "__main__":
    main(*sys.argv[1:])
