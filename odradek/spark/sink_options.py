"""The options and columns of a write, checked once where Spark hands them over."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pyspark.sql.types import ArrayType, StructType

from odradek.client.config import ProducerConfig
from odradek.spark.client_options import client_configs, take_bootstrap
from odradek.spark.schema import HEADER

# The columns a write uses, and the types (Spark's simple strings) each may have.
_COLUMN_TYPES = {
    "value": ("binary", "string"),
    "key": ("binary", "string"),
    "topic": ("string",),
    "partition": ("int",),
    "headers": (ArrayType(HEADER).simpleString(),),
}


@dataclass(frozen=True)
class SinkOptions:
    """Where to write and how: ``bootstrap``, ``topic`` and ``kafka.*`` producer settings.

    The ``topic`` option, when given, overrides a topic column (as in Spark's Kafka sink).
    """

    bootstrap: str
    topic: str | None = None
    producer_configs: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def parse(cls, options: Mapping[str, str], schema: StructType) -> SinkOptions:
        """Check ``options`` and the DataFrame's ``schema``.

        ValueError, or the client's error for a bad ``kafka.*`` value, says what is wrong.
        """
        options = {name.lower(): value for name, value in options.items()}
        configs = client_configs(options, ProducerConfig)
        sink = cls(take_bootstrap(options, configs), options.get("topic"), configs)
        _check_columns(schema, sink.topic)
        ProducerConfig(**sink.client_configs())  # a bad setting fails now, not in every task
        return sink

    def client_configs(self) -> dict[str, Any]:
        """Keyword arguments for a producer writing with these options."""
        return {"bootstrap_servers": self.bootstrap, **self.producer_configs}


def _check_columns(schema: StructType, topic: str | None) -> None:
    columns = {field.name: field.dataType for field in schema.fields}
    if "value" not in columns:
        raise ValueError("a DataFrame written to a topic needs a value column (binary or string)")
    if topic is None and "topic" not in columns:
        raise ValueError("name the topic to write to: the option topic, or a topic column")
    for name, allowed in _COLUMN_TYPES.items():
        found = columns[name].simpleString() if name in columns else None
        if found is not None and found not in allowed:
            raise ValueError(f"column {name} is {found}; it must be {' or '.join(allowed)}")
