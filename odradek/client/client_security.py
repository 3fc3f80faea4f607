"""ClientSecurity: TLS and SASL for odradek's client, from Kafka's client settings.

``security_protocol`` is PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL. TLS trusts
``ssl_ca_location`` (librdkafka's name; ``ssl_truststore_location`` is Kafka's) or the system's
authorities, checks the broker's name unless ``ssl_endpoint_identification_algorithm`` is
empty, and presents ``ssl_certificate_location`` with ``ssl_key_location`` (or a PEM
``ssl_keystore_location`` holding both) for mutual TLS. SASL logs in with ``sasl_mechanism``
(PLAIN, SCRAM-SHA-256, SCRAM-SHA-512), ``sasl_username`` and ``sasl_password`` right after
ApiVersions on every connection.
"""

from __future__ import annotations

import ssl
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any

from odradek.errors import InvalidConfigError, SaslAuthenticationFailedError
from odradek.protocol.sasl import SaslAuthenticateRequest, SaslHandshakeRequest

SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")

Send = Callable[[Any], Awaitable[Any]]


@dataclass(frozen=True)
class ClientSecurity:
    """How a client's connections are secured."""

    ssl_context: ssl.SSLContext | None = None
    sasl_mechanism: str | None = None
    sasl_username: str = ""
    sasl_password: str = ""

    def server_hostname(self, host: str) -> str | None:
        """The name TLS checks the broker's certificate against (None without TLS)."""
        return host if self.ssl_context is not None else None

    async def authenticate(self, send: Send) -> None:
        """The SASL exchange over ``send`` (a connection's request sender), when configured;
        SaslAuthenticationFailedError (from the broker) when refused."""
        if self.sasl_mechanism is None:
            return
        await send(SaslHandshakeRequest(self.sasl_mechanism))
        if self.sasl_mechanism == "PLAIN":
            await send(SaslAuthenticateRequest(f"\0{self.sasl_username}\0{self.sasl_password}"))
            return
        from scramp import ScramClient  # only SCRAM clients pay for importing it (and asn1crypto)

        scram = ScramClient([self.sasl_mechanism], self.sasl_username, self.sasl_password)
        server_first = await send(SaslAuthenticateRequest(scram.get_client_first()))
        scram.set_server_first(server_first.token)
        server_final = await send(SaslAuthenticateRequest(scram.get_client_final()))
        try:
            scram.set_server_final(server_final.token)
        except Exception as error:  # the broker could not prove it knows the credential
            message = f"the broker's SCRAM proof is wrong: {error}"
            raise SaslAuthenticationFailedError(message) from None


def client_security(
    security_protocol: str,
    sasl_mechanism: str | None,
    sasl_username: str | None,
    sasl_password: str | None,
    ssl_ca_location: str | None,
    ssl_certificate_location: str | None,
    ssl_key_location: str | None,
    ssl_keystore_location: str | None,
    ssl_key_password: str | None,
    ssl_endpoint_identification_algorithm: str,
) -> ClientSecurity:
    """The security of the given settings; InvalidConfigError naming the setting at fault."""
    protocol = security_protocol.upper()
    if protocol not in SECURITY_PROTOCOLS:
        raise InvalidConfigError(
            f"security_protocol must be one of {', '.join(SECURITY_PROTOCOLS)}, not "
            f"{security_protocol!r}"
        )
    context = None
    if protocol in ("SSL", "SASL_SSL"):
        try:
            context = ssl.create_default_context(cafile=ssl_ca_location)
            context.check_hostname = bool(ssl_endpoint_identification_algorithm)
            certificate = ssl_certificate_location or ssl_keystore_location
            if certificate:
                context.load_cert_chain(certificate, ssl_key_location, ssl_key_password)
        except (OSError, ssl.SSLError) as error:
            raise InvalidConfigError(f"ssl settings: cannot load them: {error}") from None
    if not protocol.startswith("SASL"):
        return ClientSecurity(context)
    mechanism = (sasl_mechanism or "").upper()
    if mechanism not in SASL_MECHANISMS:
        raise InvalidConfigError(
            f"sasl_mechanism must be one of {', '.join(SASL_MECHANISMS)} with {protocol}, not "
            f"{sasl_mechanism!r}"
        )
    if not sasl_username or sasl_password is None:
        raise InvalidConfigError(f"{protocol} needs sasl_username and sasl_password")
    return ClientSecurity(context, mechanism, sasl_username, sasl_password)
