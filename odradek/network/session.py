"""Session: who is on the other end of one connection, and through which listener."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from odradek.config.listeners import EndPoint
from odradek.security.kafka_principal import ANONYMOUS, KafkaPrincipal

if TYPE_CHECKING:
    from odradek.network.sasl_authenticator import SaslAuthenticator


@dataclass
class Session:
    """One connection's listener, peer and principal. The principal is ``User:ANONYMOUS``
    until SASL authentication (``User:<name>``) or a verified client certificate (its
    subject) says otherwise; on a SASL listener ``authenticator`` gates every request until
    it has."""

    listener: EndPoint
    peer: str = "unknown peer"
    certificate_principal: KafkaPrincipal = ANONYMOUS
    authenticator: SaslAuthenticator | None = field(default=None, repr=False)
    accepted_at: float = field(default_factory=lambda: asyncio.get_running_loop().time())
    """When the connection was accepted (event loop time): SASL's deadline counts from it."""
    throttle_s: float = 0.0
    """A quota's throttle not yet applied: the connection reads nothing for this long once
    the response being answered is out (KIP-219), then sets it back to 0."""
    throttled_until: float = 0.0
    """Until when (``time.monotonic``) requests already read wait before they are handled."""
    quota_lock: asyncio.Lock | None = field(default=None, repr=False)
    """Handles a quota'd client's requests one at a time, as Kafka does every connection's."""

    def throttle(self, seconds: float, now: float) -> None:
        """Mute the connection for ``seconds`` after its current response, and hold the
        requests it already sent until then (the longest throttle wins)."""
        self.throttle_s = max(self.throttle_s, seconds)
        self.throttled_until = max(self.throttled_until, now + seconds)

    @property
    def principal(self) -> KafkaPrincipal:
        """``User:<name>`` once SASL authenticated; else a verified certificate's subject on
        an SSL listener; else ``User:ANONYMOUS``."""
        if self.authenticator is not None:
            return self.authenticator.principal or ANONYMOUS
        return self.certificate_principal

    @property
    def host(self) -> str:
        """The peer's address without its port (what ACLs match hosts against)."""
        host, _, _ = self.peer.rpartition(":")
        return host.strip("[]") or self.peer

    @property
    def authenticated(self) -> bool:
        """True unless a SASL listener's client has not authenticated yet."""
        return self.authenticator is None or self.authenticator.complete


def principal_of_transport(transport: asyncio.BaseTransport) -> KafkaPrincipal:
    """The subject of the client certificate the TLS handshake verified; ANONYMOUS when the
    transport is not TLS or the client sent none."""
    if transport.get_extra_info("ssl_object") is None:
        return ANONYMOUS
    return KafkaPrincipal.from_certificate(transport.get_extra_info("peercert"))
