"""ApiVersions (key 18): the handshake a client sends first on every connection."""

from __future__ import annotations

from dataclasses import dataclass
from typing import ClassVar

from odradek.protocol.api_keys import SUPPORTED_VERSIONS, ApiKey
from odradek.protocol.schema import Message
from odradek.protocol.values.wire_types import Int16, Int32, NonNegativeInt32


@dataclass(frozen=True)
class ApiVersionsRequest(Message):
    """Names the client software, for the broker's logs and metrics."""

    api_key: ClassVar[ApiKey] = ApiKey.API_VERSIONS
    client_software_name: str = ""
    client_software_version: str = ""


@dataclass(frozen=True)
class ApiVersion:
    """The range of versions of one API a broker serves."""

    api_key: Int16
    min_version: Int16
    max_version: Int16


@dataclass(frozen=True)
class ApiVersionsResponse(Message):
    """What the broker speaks and who it is."""

    api_key: ClassVar[ApiKey] = ApiKey.API_VERSIONS
    api_versions: tuple[ApiVersion, ...]
    broker_id: Int32
    cluster_id: str
    server_version: str
    max_request_bytes: NonNegativeInt32


def supported_api_versions() -> tuple[ApiVersion, ...]:
    """Every API of this protocol module with its version range, as a broker advertises it."""
    return tuple(
        ApiVersion(api_key, min_version, max_version)
        for api_key, (min_version, max_version) in SUPPORTED_VERSIONS.items()
    )
