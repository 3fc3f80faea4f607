"""``odradek produce TOPIC``: each line of stdin becomes a record, like the console producer."""

from __future__ import annotations

import sys

import click

from odradek.cli.client_options import (
    bootstrap_option,
    client_settings,
    reports_errors,
    topic_partitions,
)
from odradek.client import Admin, FutureRecordMetadata, Producer
from odradek.errors import KafkaError
from odradek.record.compression import CompressionType


class _Deliveries:
    """Counts the records sent and failed, keeping the first error.

    Its callback runs on the producer's event loop thread; read it after the producer closed.
    """

    def __init__(self) -> None:
        self.sent = 0
        self.failed = 0
        self.first_error: KafkaError | None = None

    def watch(self, future: FutureRecordMetadata) -> None:
        self.sent += 1
        future.add_done_callback(self._done)

    def _done(self, future: FutureRecordMetadata) -> None:
        error = future.exception()
        if error is not None:
            self.failed += 1
            self.first_error = self.first_error or error

    def raise_first_error(self) -> None:
        """Raise the first delivery error, saying how many records were not delivered."""
        if self.first_error is not None:
            error = self.first_error
            raise type(error)(
                f"{error.message} ({self.failed} of {self.sent} records not delivered)"
            )


def _key_and_value(
    line: bytes, number: int, separator: bytes | None, null_value: bytes | None
) -> tuple[bytes | None, bytes | None]:
    """Line ``number`` split into key and value (null if it equals ``null_value``)."""
    key = None
    if separator is not None:
        key, found, line = line.partition(separator)
        if not found:
            raise click.ClickException(f"line {number} has no key separator {separator.decode()!r}")
    return key, (None if line == null_value else line)


def _encoded(text: str | None) -> bytes | None:
    return None if text is None else text.encode()


@click.command()
@click.argument("topic")
@click.option(
    "--partition",
    type=click.IntRange(min=0),
    metavar="P",
    help="Send every record to this partition  [default: chosen by key, as Kafka does]",
)
@click.option(
    "--acks",
    type=click.Choice(["0", "1", "all"]),
    default="all",
    show_default=True,
    help="Wait for no answer (0), for the append (1), or until it is durable (all).",
)
@click.option(
    "--key-separator",
    metavar="SEP",
    help="Split each line at the first SEP into key and value; a line without SEP is an error.",
)
@click.option(
    "--null-value",
    metavar="STR",
    help="Send a value equal to STR as null: a tombstone on a compacted topic.",
)
@click.option(
    "--compression",
    type=click.Choice([codec.label for codec in CompressionType]),
    default="none",
    show_default=True,
    help="Codec for the record batches.",
)
@bootstrap_option
@reports_errors
def produce(
    topic: str,
    partition: int | None,
    acks: str,
    key_separator: str | None,
    null_value: str | None,
    compression: str,
    bootstrap: str,
) -> None:
    """Send each line of stdin to TOPIC as one record.

    The line's end (\\n or \\r\\n) is not part of the record. Without --key-separator the key
    is null. A missing topic is created if the broker's auto.create.topics.enable is on.
    A line without the key separator stops the command after the lines before it are sent.
    Exits 1 if any record was not delivered, naming the first error.
    """
    if key_separator == "":
        raise click.BadParameter("must not be empty", param_hint="--key-separator")
    with Admin(**client_settings(bootstrap)) as admin:
        # Fails at once if the broker is down or the topic missing; the producer would retry.
        topic_partitions(admin, topic, create=True)
    separator, null = _encoded(key_separator), _encoded(null_value)
    deliveries = _Deliveries()
    settings = client_settings(bootstrap, acks=acks, compression_type=compression)
    with Producer(**settings) as producer:
        for number, line in enumerate(sys.stdin.buffer, 1):
            line = line.removesuffix(b"\n").removesuffix(b"\r")
            key, value = _key_and_value(line, number, separator, null)
            deliveries.watch(producer.send(topic, value, key, partition=partition))
    deliveries.raise_first_error()
