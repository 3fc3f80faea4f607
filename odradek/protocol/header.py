"""The envelope fields every request and response header starts with."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from odradek.errors import InvalidRequestError, KafkaError, error_code_for
from odradek.int_limits import INT16_MAX, INT16_MIN, INT32_MAX, INT32_MIN
from odradek.protocol.frame import FrameError
from odradek.protocol.schema import WIRE_KEY, Message, decode_message
from odradek.protocol.values.wire_types import ErrorCode, Int16, Int32, Payload, stored_at_once


@stored_at_once
@dataclass(frozen=True)
class RequestHeader(Message):
    """``api``, ``v``, ``id`` and ``client_id``: which API, which version, which request."""

    api_key: Int16 = field(metadata={WIRE_KEY: "api"})
    api_version: Int16 = field(metadata={WIRE_KEY: "v"})
    correlation_id: Int32 = field(metadata={WIRE_KEY: "id"})
    client_id: str | None = None

    @classmethod
    def from_header(
        cls, header: Mapping[str, Any], payload: memoryview | None = None
    ) -> RequestHeader:
        """Read the envelope of a request (the payload belongs to the body and is ignored).

        Raises FrameError when a field is missing or mistyped: without a correlation id the
        request cannot be answered, so the connection is closed (as Kafka does). Whether the API
        and version are supported is checked by :func:`odradek.protocol.messages.decode_request`.
        A well-formed envelope is read directly, anything else by the schema, which names what
        is wrong.
        """
        if is_common_envelope(header):
            return cls(header["api"], header["v"], header["id"], header.get("client_id"))
        return cls._from_schema(header)

    @classmethod
    def _from_schema(cls, header: Mapping[str, Any]) -> RequestHeader:
        try:
            return decode_message(cls, header)
        except InvalidRequestError as error:
            raise FrameError(f"bad request header: {error.message}") from None


def is_common_envelope(header: Mapping[str, Any]) -> bool:
    """Whether ``header`` is a map whose envelope fields are all there, well typed and in range:
    what :meth:`RequestHeader.from_header` reads directly (anything else goes to the schema)."""
    if type(header) is not dict:
        return False
    api_key = header.get("api")
    api_version = header.get("v")
    correlation_id = header.get("id")
    client_id = header.get("client_id")
    return (
        type(api_key) is int
        and type(api_version) is int
        and type(correlation_id) is int
        and (client_id is None or type(client_id) is str)
        and INT16_MIN <= api_key <= INT16_MAX
        and INT16_MIN <= api_version <= INT16_MAX
        and INT32_MIN <= correlation_id <= INT32_MAX
    )


@stored_at_once
@dataclass(frozen=True)
class ResponseHeader(Message):
    """``id`` of the request answered, and a request-level ``error`` code (0 = NONE)."""

    correlation_id: Int32 = field(metadata={WIRE_KEY: "id"})
    error: ErrorCode = 0
    message: str | None = None

    @classmethod
    def for_error(cls, correlation_id: int, error: BaseException) -> ResponseHeader:
        """The header answering a request that failed as a whole with ``error``."""
        message = error.message if isinstance(error, KafkaError) else str(error)
        return cls(correlation_id, error_code_for(error), message)

    def encode(self, parts: list[Payload]) -> dict[str, Any]:
        return {"id": self.correlation_id, "error": self.error, "message": self.message}
