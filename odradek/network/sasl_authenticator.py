"""SaslAuthenticator: one connection's SASL exchange on a SASL_PLAINTEXT or SASL_SSL listener.

Kafka's order: ApiVersions (optional), SaslHandshake (the mechanism), then SaslAuthenticate
rounds carrying the mechanism's tokens (SaslHandshake v0 clients send the tokens as bare
size-prefixed frames instead). Until the exchange completes only those three APIs are
allowed (:meth:`allows`); the connection closes on anything else. PLAIN takes one round and is
checked against the user's salted SCRAM credential; SCRAM-SHA-256/512 take two, answered by
``scramp`` from the stored keys. A failure is answered SASL_AUTHENTICATION_FAILED, the same
for a wrong password and an unknown user, and the connection closes.
"""

from __future__ import annotations

import asyncio
import enum
import logging
from concurrent.futures import Executor

from scramp import ScramMechanism

from odradek.errors import (
    IllegalSaslStateError,
    SaslAuthenticationFailedError,
    UnsupportedSaslMechanismError,
)
from odradek.protocol.kafka import api_versions as apis
from odradek.security.credential_store import CredentialStore
from odradek.security.kafka_principal import KafkaPrincipal
from odradek.security.scram_credential import SCRAM_MECHANISMS

logger = logging.getLogger(__name__)

PRE_AUTHENTICATION_APIS = frozenset(
    {apis.API_VERSIONS, apis.SASL_HANDSHAKE, apis.SASL_AUTHENTICATE}
)
PLAIN = "PLAIN"
PLAIN_MECHANISM_ORDER = ("SCRAM-SHA-512", "SCRAM-SHA-256")


class SaslState(enum.Enum):
    HANDSHAKE = "handshake"
    AUTHENTICATE = "authenticate"
    COMPLETE = "complete"
    FAILED = "failed"


class SaslAuthenticator:
    """The server side of one connection's SASL exchange."""

    def __init__(
        self,
        mechanisms: tuple[str, ...],
        credentials: CredentialStore,
        executor: Executor,
        max_receive_bytes: int = 524288,
        timeout_s: float = 30.0,
        failure_delay_s: float = 0.1,
        peer: str = "unknown peer",
    ) -> None:
        self.mechanisms = mechanisms
        self.max_receive_bytes = max_receive_bytes
        """Largest request read before authentication (``sasl.server.max.receive.size``)."""
        self.timeout_s = timeout_s
        """Time from connecting to authenticating (``sasl.server.authentication.timeout.ms``)."""
        self.failure_delay_s = failure_delay_s
        """Delay of a failure's answer (``connection.failed.authentication.delay.ms``)."""
        self._credentials = credentials
        self._executor = executor
        self.peer = peer
        self.state = SaslState.HANDSHAKE
        self.mechanism: str | None = None
        self.handshake_version = 1
        self.principal: KafkaPrincipal | None = None
        self._scram = None
        self._scram_user = ""
        self._client_nonce = ""

    @property
    def complete(self) -> bool:
        return self.state is SaslState.COMPLETE

    @property
    def failed(self) -> bool:
        return self.state is SaslState.FAILED

    @property
    def expects_bare_token(self) -> bool:
        """After a SaslHandshake v0 the client's next frames are bare tokens, not requests."""
        return self.state is SaslState.AUTHENTICATE and self.handshake_version == 0

    def allows(self, api_key: int) -> bool:
        """Whether a request of ``api_key`` may be served now."""
        return self.complete or api_key in PRE_AUTHENTICATION_APIS

    def handshake(self, mechanism: str, version: int) -> None:
        """Choose ``mechanism``; raises UnsupportedSaslMechanismError or IllegalSaslStateError."""
        if self.state is not SaslState.HANDSHAKE:
            raise IllegalSaslStateError(f"SaslHandshake in state {self.state.value}")
        if mechanism not in self.mechanisms:
            self.state = SaslState.FAILED
            raise UnsupportedSaslMechanismError(
                f"mechanism {mechanism} is not enabled; enabled: {', '.join(self.mechanisms)}"
            )
        self.mechanism, self.handshake_version = mechanism, version
        self.state = SaslState.AUTHENTICATE
        if mechanism in SCRAM_MECHANISMS:
            self._scram = ScramMechanism(mechanism).make_server(self._scram_auth_info)

    async def authenticate(self, token: bytes) -> bytes:
        """The answer to one token of the client's; raises SaslAuthenticationFailedError (the
        exchange is then over) or IllegalSaslStateError."""
        if self.state is not SaslState.AUTHENTICATE:
            raise IllegalSaslStateError(f"SaslAuthenticate in state {self.state.value}")
        try:
            if self.mechanism == PLAIN:
                return await self._plain(token)
            return self._scram_step(token)
        except SaslAuthenticationFailedError as error:
            self.state = SaslState.FAILED
            logger.warning(
                "%s: SASL/%s authentication failed: %s", self.peer, self.mechanism, error.message
            )
            raise

    async def _plain(self, token: bytes) -> bytes:
        parts = token.split(b"\0")
        if len(parts) != 3:
            raise SaslAuthenticationFailedError("PLAIN token is not authzid NUL user NUL password")
        authorization_id, user_bytes, password_bytes = parts
        try:
            user, password = user_bytes.decode(), password_bytes.decode()
        except UnicodeDecodeError:
            raise SaslAuthenticationFailedError("PLAIN user or password is not UTF-8") from None
        if authorization_id and authorization_id != user_bytes:
            raise SaslAuthenticationFailedError(
                "PLAIN authorization id differs from the user: impersonation is not supported"
            )
        credentials = self._credentials.credentials(user)
        credential = next((credentials[m] for m in PLAIN_MECHANISM_ORDER if m in credentials), None)
        matches = credential is not None and await asyncio.get_running_loop().run_in_executor(
            self._executor, credential.matches, password
        )
        if not matches:
            raise _invalid_credentials(PLAIN)
        self._succeed(user)
        return b""

    def _scram_step(self, token: bytes) -> bytes:
        scram = self._scram
        try:
            message = token.decode("utf-8")
            if scram.stage is None:
                self._client_nonce = _attribute(message, "r")
                scram.set_client_first(message)
                return scram.get_server_first().encode()
            server_nonce = str(scram.nonce)
            if _attribute(message, "r") == self._client_nonce + server_nonce:
                # librdkafka before 2.6.1 repeats its own nonce before the server's in its
                # final message; Kafka 3.x accepts that (it checks that the nonce ends with
                # the server's), so kcat and older clients of Linux distributions work.
                scram.nonce = type(scram.nonce)(self._client_nonce + server_nonce)
            scram.set_client_final(message)
            answer = scram.get_server_final().encode()
        except Exception as error:  # scramp's errors, an unknown user, a token not UTF-8
            logger.debug("%s: SCRAM step failed: %r", self.peer, error)
            raise _invalid_credentials(self.mechanism) from None
        self._succeed(self._scram_user)
        return answer

    def _scram_auth_info(self, user: str) -> tuple[bytes, bytes, bytes, int]:
        self._scram_user = user
        credential = self._credentials.credential(user, self.mechanism)
        if credential is None:
            raise KeyError(user)
        return credential.auth_info()

    def _succeed(self, user: str) -> None:
        self.principal = KafkaPrincipal.user(user)
        self.state = SaslState.COMPLETE
        logger.info(
            "%s: authenticated as %s with SASL/%s", self.peer, self.principal, self.mechanism
        )


def _invalid_credentials(mechanism: str | None) -> SaslAuthenticationFailedError:
    return SaslAuthenticationFailedError(
        f"Authentication failed during authentication due to invalid credentials with SASL "
        f"mechanism {mechanism}"
    )


def _attribute(message: str, name: str) -> str:
    """The value of SCRAM attribute ``name`` (``r`` in ``n,,n=alice,r=abc``), "" if absent."""
    for part in message.split(","):
        if part.startswith(f"{name}="):
            return part[len(name) + 1 :]
    return ""
