"""``odradek consume TOPIC``: print a topic's records, like the console consumer."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from itertools import islice

import click

from odradek.cli.bytes_display import json_bytes, json_headers
from odradek.cli.client_options import (
    admin_settings,
    bootstrap_from,
    bootstrap_option,
    client_configs,
    name_argument,
    parse_assignments,
    property_option,
    reports_errors,
    topic_partitions,
)
from odradek.client import Admin, Consumer, ConsumerRecord
from odradek.client.config import ConsumerConfig
from odradek.errors import CommitFailedError, UnknownTopicOrPartitionError
from odradek.record.record_batch import TimestampType
from odradek.topic_partition import TopicPartition

POLL_MS = 1000
"""How long one poll waits when there is no --timeout-ms."""


def _json_line(record: ConsumerRecord) -> str:
    return json.dumps(
        {
            "partition": record.partition,
            "offset": record.offset,
            "timestamp": record.timestamp,
            "key": json_bytes(record.key),
            "value": json_bytes(record.value),
            "headers": json_headers(record.headers),
        },
        ensure_ascii=False,
    )


def _text(data: bytes | None, null: str = "null") -> str:
    return null if data is None else data.decode(errors="backslashreplace")


_TIMESTAMP_NAMES = {
    TimestampType.CREATE_TIME: "CreateTime",
    TimestampType.LOG_APPEND_TIME: "LogAppendTime",
}


@dataclass(frozen=True)
class TextFormat:
    """The text line of a record, as Kafka's console consumer's ``--property`` settings shape
    it (its ``DefaultMessageFormatter``): ``print.timestamp``, ``print.partition``,
    ``print.offset``, ``print.headers``, ``print.key`` and ``print.value`` choose the fields,
    in that order, joined by ``key.separator``; ``null.literal`` stands for null.
    ``print.key`` unset prints the key of the records that have one."""

    print_timestamp: bool = False
    print_partition: bool = False
    print_offset: bool = False
    print_headers: bool = False
    print_key: bool | None = None
    print_value: bool = True
    key_separator: str = "\t"
    null_literal: str = "null"

    @classmethod
    def of(cls, properties: Mapping[str, str]) -> TextFormat:
        """The format ``--property NAME=VALUE`` settings give; a usage error for others."""
        settings: dict[str, object] = {}
        for name, value in properties.items():
            attribute = name.replace(".", "_")
            if attribute not in cls.__dataclass_fields__:
                known = ", ".join(f.replace("_", ".") for f in cls.__dataclass_fields__)
                raise click.BadParameter(
                    f"unknown property {name!r} (known: {known})", param_hint="--property"
                )
            if attribute.startswith("print_"):
                if value.lower() not in ("true", "false"):
                    raise click.BadParameter(
                        f"{name} must be true or false, not {value!r}", param_hint="--property"
                    )
                settings[attribute] = value.lower() == "true"
            else:
                settings[attribute] = value.encode().decode("unicode_escape")  # \t, \n
        return cls(**settings)

    def line(self, record: ConsumerRecord) -> str:
        fields = []
        if self.print_timestamp:
            fields.append(f"{_TIMESTAMP_NAMES[record.timestamp_type]}:{record.timestamp}")
        if self.print_partition:
            fields.append(f"Partition:{record.partition}")
        if self.print_offset:
            fields.append(f"Offset:{record.offset}")
        if self.print_headers:
            headers = ",".join(
                f"{key}:{_text(value, self.null_literal)}" for key, value in record.headers
            )
            fields.append(headers or "NO_HEADERS")
        if self.print_key or (self.print_key is None and record.key is not None):
            fields.append(_text(record.key, self.null_literal))
        if self.print_value:
            fields.append(_text(record.value, self.null_literal))
        return self.key_separator.join(fields)


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


def _consume_in_group(
    topic: str,
    group: str,
    reset: str,
    max_messages: int | None,
    timeout_ms: int | None,
    line: Callable[[ConsumerRecord], str],
    configs: dict[str, object],
) -> None:
    """Print what the group assigns this member, committing after each poll exactly the
    records printed (so a stop after --max-messages does not skip records)."""
    left = max_messages
    group_configs = {"client_id": "odradek-console-consumer", **configs}
    group_configs.update(group_id=group, auto_offset_reset=reset, enable_auto_commit=False)
    with Consumer(**group_configs) as consumer:
        consumer.subscribe([topic])
        while left is None or left > 0:
            records = consumer.poll(POLL_MS if timeout_ms is None else timeout_ms)
            if not records and timeout_ms is not None:
                return
            printed = records if left is None else records[:left]
            consumed: dict[TopicPartition, int] = {}
            for record in printed:
                click.echo(line(record))
                consumed[TopicPartition(record.topic, record.partition)] = record.offset + 1
            if consumed:
                try:
                    consumer.commit(consumed)
                except CommitFailedError as error:  # rebalanced: the next owner re-reads them
                    click.echo(f"warning: {error}", err=True)
            if left is not None:
                left -= len(printed)


@click.command()
@name_argument("topic", "--topic", "TOPIC")
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
    type=click.Choice(["text", "json"]),
    default="text",
    show_default=True,
    help="How each record is printed (see above).",
)
@click.option(
    "--property",
    "format_properties",
    multiple=True,
    metavar="NAME=VALUE",
    help="Shape the text lines as Kafka's console consumer does: print.key, print.timestamp, "
    "print.partition, print.offset, print.headers, print.value (true/false), key.separator, "
    "null.literal (repeatable).",
)
@property_option("--consumer-property", "consumer")
@click.option(
    "--group",
    metavar="GROUP",
    help="Consume as a member of this consumer group: its partitions of TOPIC, from its "
    "committed offsets, committing as it goes.",
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
    format_properties: tuple[str, ...],
    properties: tuple[str, ...],
    group: str | None,
    bootstrap: str,
) -> None:
    """Print the records of TOPIC, one per line.

    Without a start option only records that arrive from now on are printed. With --group
    the group's committed offsets come first (--from-beginning then only matters for
    partitions the group has none for). An offset
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
    text = TextFormat.of(parse_assignments(format_properties, "--property"))
    if format_properties and output_format != "text":
        raise click.UsageError("--property shapes the text format only")
    configs = client_configs(ConsumerConfig, properties, "--consumer-property")
    configs = bootstrap_from(bootstrap, {**configs, "auto_offset_reset": "none"})
    ConsumerConfig(**configs)  # a bad value is an error before anything is asked
    line: Callable[[ConsumerRecord], str] = text.line if output_format == "text" else _json_line
    if group is not None and (partition is not None or offset is not None or timestamp is not None):
        raise click.UsageError(
            "--group reads what the group assigns: no --partition, --offset or --timestamp"
        )
    try:
        if group is not None:
            reset = "earliest" if from_beginning else "latest"
            _consume_in_group(topic, group, reset, max_messages, timeout_ms, line, configs)
            return
        with Admin(**admin_settings(configs)) as admin:
            partitions = _selected(topic, topic_partitions(admin, topic), partition)
        with Consumer(**configs) as consumer:
            consumer.assign(partitions)
            _seek(consumer, partitions, from_beginning, offset, timestamp)
            for record in islice(_polled(consumer, timeout_ms), max_messages):
                click.echo(line(record))
    except KeyboardInterrupt:  # Ctrl-C is how a console consumer is stopped: not an error
        return
