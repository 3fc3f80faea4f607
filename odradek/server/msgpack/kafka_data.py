"""MsgpackKafkaData: the msgpack APIs that carry Kafka's data, answered by the Kafka handlers.

A Kafka-data message (protocol/kafka_data.py) holds the request data of one fixed Kafka
version of its API, so it is handed, as it is, to the handler that answers that API on Kafka's
own listener (a ``KafkaHandler`` of KafkaRequestHandler) as a KafkaRequest of that version;
the handler's answer is the response's data. Nothing here knows any one API: what an API
does (and whom it authorizes) is its Kafka handler's, on both protocols alike.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from odradek.errors import UnsupportedVersionError
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.header import RequestHeader
from odradek.protocol.kafka_data import KAFKA_DATA_VERSIONS, KafkaData, kafka_data_response
from odradek.server.kafka.request import KafkaHandler, KafkaRequest
from odradek.server.request_context import RequestContext


class MsgpackKafkaData:
    """Answers each Kafka-data request with the Kafka handler of its API."""

    def __init__(self, kafka_handlers: Mapping[int, KafkaHandler]) -> None:
        self._kafka_handlers = kafka_handlers

    @staticmethod
    def api_keys() -> frozenset[ApiKey]:
        """The APIs that have Kafka-data versions."""
        return frozenset(api_key for api_key, _ in KAFKA_DATA_VERSIONS)

    def served_api_keys(self) -> frozenset[ApiKey]:
        """Those of them this broker answers: the APIs it has a Kafka handler for (the others
        are refused, saying so)."""
        return frozenset(key for key in self.api_keys() if key in self._kafka_handlers)

    async def handle(self, request: KafkaData, context: RequestContext) -> KafkaData:
        """The response to ``request``: its Kafka handler's answer to the same data.

        UNSUPPORTED_VERSION (not retriable, saying so) when this broker has no Kafka handler
        for the API, so a client fails at once rather than waiting."""
        api_key = request.api_key
        handler = self._kafka_handlers.get(api_key)
        if handler is None:
            raise UnsupportedVersionError(
                f"{ApiKey(api_key).display_name} is not served by this broker"
            )
        header = context.header
        kafka_version = request.kafka_version
        kafka_request = KafkaRequest(
            api_key, kafka_version, header.correlation_id, header.client_id, dict(request.data)
        )
        kafka_context = RequestContext(
            context.peer,
            RequestHeader(api_key, kafka_version, header.correlation_id, header.client_id),
            context.session,
        )
        data = await handler(kafka_request, kafka_context)
        return kafka_data_response(ApiKey(api_key), request.wire_version)(data)


def by_version(
    own: Callable[[Any, RequestContext], Any], kafka_data: MsgpackKafkaData
) -> Callable[[Any, RequestContext], Any]:
    """The handler of an API with both kinds of message: odradek's own (``own``) for v0,
    the Kafka handler's for the Kafka-data versions."""

    def handle(request: Any, context: RequestContext) -> Any:
        if isinstance(request, KafkaData):
            return kafka_data.handle(request, context)
        return own(request, context)

    return handle
