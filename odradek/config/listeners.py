"""Listeners as Kafka names them: ``listeners``, ``advertised.listeners`` and
``listener.security.protocol.map``.

A listener is ``NAME://host:port``; its security protocol is the map's entry for NAME:
PLAINTEXT, SSL (TLS), SASL_PLAINTEXT or SASL_SSL (SASL authentication, over TLS for the
latter). Several listeners may be served at once (plaintext on loopback, SASL_SSL outside).
``host`` and ``port`` remain a shorthand for ``PLAINTEXT://host:port`` when ``listeners`` is not
set.
"""

from __future__ import annotations

import re
import socket
from dataclasses import dataclass

from odradek.errors import InvalidConfigError

DEFAULT_SECURITY_PROTOCOL_MAP = (
    "PLAINTEXT:PLAINTEXT",
    "SSL:SSL",
    "SASL_PLAINTEXT:SASL_PLAINTEXT",
    "SASL_SSL:SASL_SSL",
)
SUPPORTED_SECURITY_PROTOCOLS = frozenset({"PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL"})
_LISTENER = re.compile(r"^([A-Za-z0-9_]+)://(\[[^\]]*\]|[^:\[\]]*):(\d+)$")


@dataclass(frozen=True)
class EndPoint:
    """One listener: its name, the host and port, and its security protocol."""

    listener_name: str
    host: str
    port: int
    security_protocol: str

    def __str__(self) -> str:
        return f"{self.listener_name}://{self.host}:{self.port}"

    @property
    def uses_tls(self) -> bool:
        return self.security_protocol in ("SSL", "SASL_SSL")

    @property
    def uses_sasl(self) -> bool:
        return self.security_protocol in ("SASL_PLAINTEXT", "SASL_SSL")


def security_protocol_map(entries: tuple[str, ...]) -> dict[str, str]:
    """``NAME:PROTOCOL`` entries as a dict; raises InvalidConfigError for a bad entry."""
    mapping = {}
    for entry in entries:
        name, _, protocol = entry.partition(":")
        if not name or not protocol:
            raise InvalidConfigError(
                f"listener.security.protocol.map entry {entry!r} is not NAME:PROTOCOL"
            )
        mapping[name.upper()] = protocol.upper()
    return mapping


def parse_listeners(
    key: str, entries: tuple[str, ...], protocols: dict[str, str]
) -> tuple[EndPoint, ...]:
    """The end points of ``entries`` (the value of setting ``key``)."""
    endpoints = []
    for entry in entries:
        match = _LISTENER.match(entry.strip())
        if match is None:
            raise InvalidConfigError(f"{key} entry {entry!r} is not NAME://host:port")
        name, host, port = match.group(1).upper(), match.group(2).strip("[]"), int(match.group(3))
        if port > 65535:
            raise InvalidConfigError(f"{key} entry {entry!r}: port {port} is above 65535")
        if name not in protocols:
            raise InvalidConfigError(
                f"{key} entry {entry!r}: listener {name} is not in listener.security.protocol.map"
            )
        protocol = protocols[name]
        if protocol not in SUPPORTED_SECURITY_PROTOCOLS:
            raise InvalidConfigError(
                f"{key} entry {entry!r}: security protocol {protocol} is not one of "
                f"{', '.join(sorted(SUPPORTED_SECURITY_PROTOCOLS))}"
            )
        endpoints.append(EndPoint(name, host, port, protocol))
    names = [endpoint.listener_name for endpoint in endpoints]
    if len(set(names)) != len(names):
        raise InvalidConfigError(f"{key} names a listener twice: {', '.join(entries)}")
    return tuple(endpoints)


def advertised_host(host: str) -> str:
    """The host to advertise for a listener bound to ``host`` (empty: this machine's name)."""
    return host or socket.getfqdn()
