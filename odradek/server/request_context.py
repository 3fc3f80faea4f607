"""RequestContext: who sent a request and which one it is, for handlers and their logs."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.values.wire_types import stored_at_once

if TYPE_CHECKING:
    from odradek.network.session import Session


class RequestHeader(Protocol):
    """What a handler reads of a request's header, whichever protocol it came in (the msgpack
    envelope, a Kafka request): which API and version, which request, which client."""

    @property
    def api_key(self) -> int: ...

    @property
    def api_version(self) -> int: ...

    @property
    def correlation_id(self) -> int: ...

    @property
    def client_id(self) -> str | None: ...


@stored_at_once
@dataclass(frozen=True)
class RequestContext:
    """The peer address and envelope of a request being handled, and its connection's
    session (listener and principal; None in tests that call handlers directly)."""

    peer: str
    header: RequestHeader
    session: Session | None = field(default=None, compare=False)

    @property
    def api_key(self) -> ApiKey:
        return ApiKey(self.header.api_key)

    def __str__(self) -> str:
        client = f" of client {self.header.client_id!r}" if self.header.client_id else ""
        return f"{self.api_key.display_name} request {self.header.correlation_id}{client}"


def client_host(context: RequestContext) -> str:
    """The peer's address as Kafka shows a member's host: ``/`` and the IP."""
    host = context.peer.rsplit(":", 1)[0] if ":" in context.peer else context.peer
    return "/" + host.strip("[]")
