"""``odradek transactions``: list and describe transactions and a partition's producers, like
``kafka-transactions.sh``."""

from __future__ import annotations

import time
from typing import NoReturn

import click

from odradek.cli.client_options import bootstrap_option, client_settings
from odradek.client import Admin
from odradek.errors import KafkaError
from odradek.topic_partition import TopicPartition


def _table(headers: list[str], rows: list[list[str]]) -> None:
    """As Kafka's tools print a table (``ToolsUtils.prettyPrintTable``): each cell padded to
    its column's width and followed by a tab, the header first."""
    widths = [max(len(row[i]) for row in [headers, *rows]) for i in range(len(headers))]
    for row in [headers, *rows]:
        click.echo(
            "".join(cell.ljust(width) + "\t" for cell, width in zip(row, widths, strict=True))
        )


def _fail(message: str, error: KafkaError) -> NoReturn:
    """What kafka-transactions.sh does when a request fails: the reason on stderr, exit 1."""
    click.echo(f"{message}: {error}.", err=True)
    raise click.exceptions.Exit(1)


@click.group()
def transactions() -> None:
    """Transactions: the transactional ids the coordinator knows and their state."""


@transactions.command("list")
@click.option(
    "--duration-filter",
    type=int,
    default=-1,
    metavar="MS",
    help="Only transactions open longer than this many milliseconds (< 0: every one).",
)
@bootstrap_option
def list_transactions(duration_filter: int, bootstrap: str) -> None:
    """Print every transactional id: its coordinator, producer id and state."""
    try:
        with Admin(**client_settings(bootstrap)) as admin:
            listed = admin.list_transactions(duration_filter_ms=duration_filter)
    except KafkaError as error:
        _fail("Failed to list transactions", error)
    rows = [
        [listing.transactional_id, str(broker_id), str(listing.producer_id), listing.state]
        for broker_id, listings in listed.items()
        for listing in listings
    ]
    _table(["TransactionalId", "Coordinator", "ProducerId", "TransactionState"], rows)


@transactions.command()
@click.option("--transactional-id", required=True, metavar="ID", help="The transactional id.")
@bootstrap_option
def describe(transactional_id: str, bootstrap: str) -> None:
    """Print the state of TRANSACTIONAL-ID's transaction at its coordinator; exit 1 when the
    coordinator does not know the id."""
    try:
        with Admin(**client_settings(bootstrap)) as admin:
            described = admin.describe_transactions([transactional_id])[transactional_id]
    except KafkaError as error:
        _fail(
            f"Failed to describe transaction state of transactional-id `{transactional_id}`",
            error,
        )
    started = described.transaction_start_time_ms
    now_ms = int(time.time() * 1000)
    row = [
        str(described.coordinator_id),
        transactional_id,
        str(described.producer_id),
        str(described.producer_epoch),
        described.state,
        str(described.transaction_timeout_ms),
        "None" if started is None else str(started),
        "None" if started is None else str(now_ms - started),
        ",".join(str(tp) for tp in described.topic_partitions),
    ]
    _table(
        [
            "CoordinatorId",
            "TransactionalId",
            "ProducerId",
            "ProducerEpoch",
            "TransactionState",
            "TransactionTimeoutMs",
            "CurrentTransactionStartTimeMs",
            "TransactionDurationMs",
            "TopicPartitions",
        ],
        [row],
    )


@transactions.command("describe-producers")
@click.option("--topic", required=True, help="The topic of the partition.")
@click.option("--partition", required=True, type=int, help="The partition.")
@bootstrap_option
def describe_producers(topic: str, partition: int, bootstrap: str) -> None:
    """Print the active producers of a partition at its leader: their epoch, last sequence
    and timestamp, and the first offset of their open transaction."""
    tp = TopicPartition(topic, partition)
    try:
        with Admin(**client_settings(bootstrap)) as admin:
            producers = admin.describe_producers([tp])[tp]
    except KafkaError as error:
        _fail(f"Failed to describe producers of partition {tp}", error)
    rows = [
        [
            str(p.producer_id),
            str(p.producer_epoch),
            str(-1 if p.coordinator_epoch is None else p.coordinator_epoch),
            str(p.last_sequence),
            str(p.last_timestamp),
            "None"
            if p.current_transaction_start_offset is None
            else str(p.current_transaction_start_offset),
        ]
        for p in producers
    ]
    _table(
        [
            "ProducerId",
            "ProducerEpoch",
            "LatestCoordinatorEpoch",
            "LastSequence",
            "LastTimestamp",
            "CurrentTransactionStartOffset",
        ],
        rows,
    )
