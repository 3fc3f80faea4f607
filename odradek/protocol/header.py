"""The envelope fields every request and response header starts with."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from odradek.errors import InvalidRequestError, KafkaError, error_code_for
from odradek.protocol.frame import FrameError
from odradek.protocol.schema import WIRE_KEY, ErrorCode, Int16, Int32, Message


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
        """
        try:
            return super().from_header(header)
        except InvalidRequestError as error:
            raise FrameError(f"bad request header: {error.message}") from None


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
