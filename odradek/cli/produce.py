"""``odradek produce TOPIC``: each line of stdin becomes a record, like the console producer."""

from __future__ import annotations

import sys
import time

import click

from odradek.cli.client_options import (
    admin_settings,
    bootstrap_from,
    bootstrap_option,
    client_configs,
    name_argument,
    property_option,
    reports_errors,
    topic_partitions,
    with_explicit,
)
from odradek.client import Admin, FutureRecordMetadata, Producer
from odradek.client.config import ProducerConfig
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

    def summary(self, topic: str, seconds: float) -> str:
        """``Sent 200,000 records to t in 3.1 s (64,516 records/s).`` and the failures."""
        delivered = self.sent - self.failed
        rate = delivered / seconds if seconds > 0 else 0.0
        line = f"Sent {delivered:,} records to {topic} in {seconds:,.1f} s ({rate:,.0f} records/s)"
        if self.failed:
            line += f"; {self.failed:,} not delivered"
        return line + "."

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
@name_argument("topic", "--topic", "TOPIC")
@click.option(
    "--partition",
    type=click.IntRange(min=0),
    metavar="P",
    help="Send every record to this partition  [default: chosen by key, as Kafka does]",
)
@click.option(
    "--acks",
    type=click.Choice(["0", "1", "all"]),
    help="Wait for no answer (0), for the append (1), or until it is durable (all)  [default: all]",
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
    help="Codec for the record batches  [default: none]",
)
@click.option(
    "--batch-size",
    type=click.IntRange(min=1),
    metavar="BYTES",
    help="Records of a partition sent together, in bytes (batch.size)  [default: 16384]",
)
@click.option(
    "--linger-ms",
    type=click.IntRange(min=0),
    metavar="MS",
    help="How long a batch waits for more records before it is sent (linger.ms)  [default: 5]",
)
@property_option("--producer-property", "producer")
@bootstrap_option
@reports_errors
def produce(
    topic: str,
    partition: int | None,
    acks: str | None,
    key_separator: str | None,
    null_value: str | None,
    compression: str | None,
    batch_size: int | None,
    linger_ms: int | None,
    properties: tuple[str, ...],
    bootstrap: str,
) -> None:
    """Send each line of stdin to TOPIC as one record.

    The line's end (\\n or \\r\\n) is not part of the record. Without --key-separator the key
    is null. A missing topic is created if the broker's auto.create.topics.enable is on.
    A line without the key separator stops the command after the lines before it are sent.
    Exits 1 if any record was not delivered, naming the first error. When stdout is a
    terminal, a summary line follows.

    Producer settings: --command-config FILE, then --producer-property NAME=VALUE (Kafka's
    names), then this command's own options, each overriding the one before.
    """
    if key_separator == "":
        raise click.BadParameter("must not be empty", param_hint="--key-separator")
    configs = client_configs(ProducerConfig, properties, "--producer-property")
    configs = with_explicit(
        configs,
        acks=acks,
        compression_type=compression,
        batch_size=batch_size,
        linger_ms=linger_ms,
    )
    configs = bootstrap_from(bootstrap, configs)
    ProducerConfig(**configs)  # a bad value is an error before anything is sent
    with Admin(**admin_settings(configs)) as admin:
        # Fails at once if the broker is down or the topic missing; the producer would retry.
        topic_partitions(admin, topic, create=True)
    separator, null = _encoded(key_separator), _encoded(null_value)
    deliveries = _Deliveries()
    started = time.monotonic()
    with Producer(**configs) as producer:
        for number, line in enumerate(sys.stdin.buffer, 1):
            line = line.removesuffix(b"\n").removesuffix(b"\r")
            key, value = _key_and_value(line, number, separator, null)
            deliveries.watch(producer.send(topic, value, key, partition=partition))
    if sys.stdout.isatty():
        click.echo(deliveries.summary(topic, time.monotonic() - started))
    deliveries.raise_first_error()
