"""SaslHandshake (key 17) and SaslAuthenticate (key 36) on odradek's protocol.

The exchange is Kafka's: on a SASL listener a client sends ApiVersions (optional), then
SaslHandshake naming its mechanism, then SaslAuthenticate requests carrying the mechanism's
tokens until the broker's answer completes it (PLAIN: one round; SCRAM: two). Tokens of the
mechanisms served (PLAIN, SCRAM-SHA-256/512) are text, so they travel as strings. A failure is
the response header's error (SASL_AUTHENTICATION_FAILED, UNSUPPORTED_SASL_MECHANISM,
ILLEGAL_SASL_STATE) and the broker closes the connection after it. Any other request before
the exchange completes closes the connection.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from odradek.protocol.api_keys import ApiKey
from odradek.protocol.schema import Message


@dataclass(frozen=True)
class SaslHandshakeRequest(Message):
    api_key: ClassVar[ApiKey] = ApiKey.SASL_HANDSHAKE
    mechanism: str


@dataclass(frozen=True)
class SaslHandshakeResponse(Message):
    """The mechanisms the listener offers."""

    api_key: ClassVar[ApiKey] = ApiKey.SASL_HANDSHAKE
    mechanisms: tuple[str, ...]


@dataclass(frozen=True)
class SaslAuthenticateRequest(Message):
    api_key: ClassVar[ApiKey] = ApiKey.SASL_AUTHENTICATE
    token: str


@dataclass(frozen=True)
class SaslAuthenticateResponse(Message):
    """The broker's token (SCRAM's server-first or server-final message; empty for PLAIN)."""

    api_key: ClassVar[ApiKey] = ApiKey.SASL_AUTHENTICATE
    token: str
