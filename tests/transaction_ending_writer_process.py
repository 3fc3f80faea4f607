"""Transactions, each ended as told, for the crash tests of tests/test_powercut_transactions.py,
with librdkafka (confluent-kafka: transaction version 1) or odradek's producer (EndTxn v5:
transaction version 2, an epoch bump per transaction). Transaction N writes ``N-TOPIC-0`` ..
``N-TOPIC-{R-1}`` to partition 0 of every topic given, flushes them (acknowledged, so durable),
prints ``ending N`` and commits or aborts it as ENDINGS[N] says, then prints ``committed N``
or ``aborted N``. The test stops the broker in the last ending and kills this process there.

Usage: python transaction_ending_writer_process.py CLIENT BOOTSTRAP TRANSACTIONAL_ID
       TIMEOUT_MS RECORDS ENDINGS TOPIC...   (CLIENT: librdkafka or odradek; ENDINGS: e.g.
       ``commit,abort,commit``)
"""

from __future__ import annotations

import sys
from typing import Any

TIMEOUT_S = 30


def producer(client: str, bootstrap: str, transactional_id: str, timeout_ms: int) -> Any:
    """A started transactional producer with librdkafka's method names."""
    if client == "librdkafka":
        from confluent_kafka import Producer

        librdkafka = Producer(
            {
                "bootstrap.servers": bootstrap,
                "transactional.id": transactional_id,
                "transaction.timeout.ms": timeout_ms,
                "message.timeout.ms": timeout_ms,
                "linger.ms": 0,
            }
        )
        librdkafka.init_transactions(TIMEOUT_S)
        return librdkafka
    from odradek.client import Producer as OdradekProducer

    odradek = OdradekProducer(
        bootstrap_servers=bootstrap,
        transactional_id=transactional_id,
        transaction_timeout_ms=timeout_ms,
        linger_ms=0,
    )
    odradek.init_transactions()

    class Adapter:
        begin_transaction = odradek.begin_transaction

        def produce(self, topic: str, value: bytes, partition: int) -> None:
            odradek.send(topic, value, partition=partition)

        def flush(self, timeout_s: float) -> int:
            odradek.flush()
            return 0

        def commit_transaction(self, timeout_s: float) -> None:
            odradek.commit_transaction()

        def abort_transaction(self, timeout_s: float) -> None:
            odradek.abort_transaction()

    return Adapter()


def main(
    client: str,
    bootstrap: str,
    transactional_id: str,
    timeout_ms: str,
    records: str,
    endings: str,
    *topics: str,
) -> None:
    writer = producer(client, bootstrap, transactional_id, int(timeout_ms))
    for number, ending in enumerate(endings.split(",")):
        writer.begin_transaction()
        for topic in topics:
            for record in range(int(records)):
                writer.produce(topic, f"{number}-{topic}-{record}".encode(), partition=0)
        assert writer.flush(TIMEOUT_S) == 0, "records not acknowledged"
        print(f"ending {number}", flush=True)
        if ending == "commit":
            writer.commit_transaction(TIMEOUT_S)
            print(f"committed {number}", flush=True)
        else:
            writer.abort_transaction(TIMEOUT_S)
            print(f"aborted {number}", flush=True)


if __name__ == "__main__":
    main(*sys.argv[1:])
