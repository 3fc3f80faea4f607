"""``odradek consume TOPIC``: print a topic's records, like the console consumer."""

from __future__ import annotations

import base64
import json
from collections.abc import Callable, Iterator
from itertools import islice

import click

from odradek.cli.client_options import (
    bootstrap_option,
    client_settings,
    reports_errors,
    topic_partitions,
)
from odradek.client import Admin, Consumer, ConsumerRecord
from odradek.errors import UnknownTopicOrPartitionError
from odradek.topic_partition import TopicPartition

POLL_MS = 1000
"""How long one poll waits when there is no --timeout-ms."""


def _json_bytes(data: bytes | None) -> str | dict[str, str] | None:
    """UTF-8 text, or ``{"base64": ...}`` when ``data`` is not valid UTF-8; None stays None."""
    if data is None:
        return None
    try:
        return data.decode()
    except UnicodeDecodeError:
        return {"base64": base64.b64encode(data).decode("ascii")}


def _json_line(record: ConsumerRecord) -> str:
    return json.dumps(
        {
            "partition": record.partition,
            "offset": record.offset,
            "timestamp": record.timestamp,
            "key": _json_bytes(record.key),
            "value": _json_bytes(record.value),
            "headers": [{"key": k, "value": _json_bytes(v)} for k, v in record.headers],
        },
        ensure_ascii=False,
    )


def _text(data: bytes | None) -> str:
    return "null" if data is None else data.decode(errors="backslashreplace")


def _text_line(record: ConsumerRecord) -> str:
    value = _text(record.value)
    return value if record.key is None else f"{_text(record.key)}\t{value}"


FORMATS: dict[str, Callable[[ConsumerRecord], str]] = {"text": _text_line, "json": _json_line}


def _selected(
    topic: str, partitions: list[TopicPartition], partition: int | None
) -> list[TopicPartition]:
    """All ``partitions`` of ``topic``, or the one numbered ``partition`` if the topic has it."""
    if partition is None:
        return partitions
    chosen = [tp for tp in partitions if tp.partition == partition]
    if not chosen:
        raise UnknownTopicOrPartitionError(
            f"topic {topic!r} has {len(partitions)} partitions, no partition {partition}"
        )
    return chosen


def _seek(
    consumer: Consumer,
    partitions: list[TopicPartition],
    from_beginning: bool,
    offset: int | None,
    timestamp: int | None,
) -> None:
    """Position every partition at the start the options ask for (default: the end)."""
    if from_beginning:
        consumer.seek_to_beginning(*partitions)
    elif offset is not None:
        for tp in partitions:
            consumer.seek(tp, offset)
    elif timestamp is not None:
        found = consumer.offsets_for_times(dict.fromkeys(partitions, timestamp))
        for tp, entry in found.items():
            if entry is None:
                consumer.seek_to_end(tp)
            else:
                consumer.seek(tp, entry.offset)
    else:
        consumer.seek_to_end(*partitions)


def _polled(consumer: Consumer, timeout_ms: int | None) -> Iterator[ConsumerRecord]:
    """Records as they come, until none came for ``timeout_ms`` (None: forever)."""
    while True:
        records = consumer.poll(POLL_MS if timeout_ms is None else timeout_ms)
        if not records and timeout_ms is not None:
            return
        yield from records


@click.command()
@click.argument("topic")
@click.option(
    "--partition",
    type=click.IntRange(min=0),
    metavar="P",
    help="Read only this partition  [default: every partition of the topic]",
)
@click.option("--from-beginning", is_flag=True, help="Start at the log start offset.")
@click.option(
    "--offset",
    type=click.IntRange(min=0),
    metavar="N",
    help="Start at this offset (in each partition read).",
)
@click.option(
    "--timestamp",
    type=click.IntRange(min=0),
    metavar="MS",
    help="Start at the first record with a timestamp >= MS (milliseconds since the epoch).",
)
@click.option(
    "--max-messages", type=click.IntRange(min=1), metavar="N", help="Stop after N records."
)
@click.option(
    "--timeout-ms",
    type=click.IntRange(min=0),
    metavar="MS",
    help="Stop when no record came for this long  [default: wait forever]",
)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(list(FORMATS)),
    default="text",
    show_default=True,
    help="How each record is printed (see above).",
)
@bootstrap_option
@reports_errors
def consume(
    topic: str,
    partition: int | None,
    from_beginning: bool,
    offset: int | None,
    timestamp: int | None,
    max_messages: int | None,
    timeout_ms: int | None,
    output_format: str,
    bootstrap: str,
) -> None:
    """Print the records of TOPIC, one per line.

    Without a start option only records that arrive from now on are printed. An offset
    outside a partition's log is an error (OFFSET_OUT_OF_RANGE); a timestamp later than
    every record waits for new ones.

    \b
    text: the value, or KEY<TAB>VALUE when the record has a key; null prints as null,
          bytes that are not UTF-8 as \\xNN escapes.
    json: {"partition", "offset", "timestamp", "key", "value", "headers"}, headers a list
          of {"key", "value"}; keys and values are strings when they are UTF-8, null
          when null, else {"base64": "..."}.
    """
    if [from_beginning, offset is not None, timestamp is not None].count(True) > 1:
        raise click.UsageError("give only one of --from-beginning, --offset and --timestamp")
    with Admin(**client_settings(bootstrap)) as admin:
        partitions = _selected(topic, topic_partitions(admin, topic), partition)
    line = FORMATS[output_format]
    with Consumer(**client_settings(bootstrap, auto_offset_reset="none")) as consumer:
        consumer.assign(partitions)
        _seek(consumer, partitions, from_beginning, offset, timestamp)
        for record in islice(_polled(consumer, timeout_ms), max_messages):
            click.echo(line(record))
