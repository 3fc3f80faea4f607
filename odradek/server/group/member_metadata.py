"""MemberMetadata: one member of a classic group and what it waits for."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

Protocols = Sequence[tuple[str, bytes]]
"""A member's (protocol name, metadata) pairs, in its order of preference."""


@dataclass
class MemberMetadata:
    """A member's identity, timeouts, supported protocols (name, metadata, in preference
    order), its assignment, and its parked JoinGroup or SyncGroup if any.

    ``protocols`` and ``assignment`` are the client's bytes, kept and relayed untouched.
    """

    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: Protocols
    assignment: bytes = b""
    join_future: asyncio.Future[Any] | None = None
    sync_future: asyncio.Future[Any] | None = None
    heartbeat_timer: asyncio.TimerHandle | None = field(default=None, repr=False)

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    @property
    def is_awaiting_join(self) -> bool:
        return self.join_future is not None and not self.join_future.done()

    @property
    def is_awaiting_sync(self) -> bool:
        return self.sync_future is not None and not self.sync_future.done()

    def protocol_names(self) -> list[str]:
        return [name for name, _ in self.protocols]

    def metadata(self, protocol: str) -> bytes:
        """This member's metadata for ``protocol`` (which it must support)."""
        for name, metadata in self.protocols:
            if name == protocol:
                return metadata
        raise KeyError(f"member {self.member_id} does not support protocol {protocol}")

    def matches(self, protocols: Protocols) -> bool:
        """Whether ``protocols`` are exactly what this member already declared."""
        return [(n, bytes(m)) for n, m in protocols] == [(n, bytes(m)) for n, m in self.protocols]
