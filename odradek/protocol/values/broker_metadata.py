"""BrokerMetadata: where a broker can be reached (Kafka's ``Node``), as both protocols' Metadata
and FindCoordinator answer it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from odradek.protocol.values.wire_types import Int32, IntRange

Port = Annotated[int, IntRange(0, 65535, "a TCP port (0..65535)")]


@dataclass(frozen=True)
class BrokerMetadata:
    """Where the broker can be reached."""

    node_id: Int32
    host: str
    port: Port
