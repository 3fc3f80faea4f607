"""KafkaRequest: one decoded Kafka-protocol request, and how its handlers reach ApiRouter."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, NamedTuple

from odradek.errors import KafkaError
from odradek.protocol.kafka import api_versions as apis
from odradek.protocol.schema import Message
from odradek.server.request_context import RequestContext

CallApis = Callable[[RequestContext, Message], Awaitable[Any]]
"""Hands an odradek message to ApiRouter under its own API key; returns the response."""

KafkaHandler = Callable[["KafkaRequest", RequestContext], Awaitable[Any]]
"""Answers one Kafka API: the response's fields, or None when there is none (acks=0)."""

LEADER_EPOCH = 0
"""The partition leader epoch of every partition: the single broker leads each partition in
epoch 0 for ever (docs/kafka-compatibility.md, "Leader epochs")."""


class KafkaRequest(NamedTuple):
    """A decoded request: its header and body, or why it is refused (``refusal``)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None = None
    body: Any = None  # a dict of fields; a KafkaProduceRequest or KafkaFetchRequest
    refusal: KafkaError | None = None

    def __str__(self) -> str:
        client = f" of client {self.client_id!r}" if self.client_id else ""
        name = apis.api_name(self.api_key)
        return f"{name} v{self.api_version} request {self.correlation_id}{client}"
