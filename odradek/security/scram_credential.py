"""ScramCredential: a user's salted SCRAM secret, as RFC 5802 and Kafka keep it.

Only the salt, the iteration count and the two derived keys are kept, never the password nor
the salted password: StoredKey = H(HMAC(SaltedPassword, "Client Key")) and ServerKey =
HMAC(SaltedPassword, "Server Key"). They suffice to check a SCRAM exchange and, by deriving
them again from a candidate password, a PLAIN one.
"""

from __future__ import annotations

import hashlib
import hmac
import os
from dataclasses import dataclass

SCRAM_MECHANISMS = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}
MIN_ITERATIONS = 4096
"""Kafka's minimum iteration count; also the default of ``odradek users add``."""
MAX_ITERATIONS = 16384
"""Kafka's maximum: a higher count costs the broker a PLAIN check's time for nothing."""
SALT_BYTES = 32


@dataclass(frozen=True)
class ScramCredential:
    """One mechanism's credential of one user."""

    mechanism: str
    salt: bytes
    stored_key: bytes
    server_key: bytes
    iterations: int

    @classmethod
    def from_salted_password(
        cls, mechanism: str, salt: bytes, salted_password: bytes, iterations: int
    ) -> ScramCredential:
        """What AlterUserScramCredentials carries (the client salts the password itself)."""
        digest = SCRAM_MECHANISMS[mechanism]
        client_key = hmac.digest(salted_password, b"Client Key", digest)
        stored_key = hashlib.new(digest, client_key).digest()
        server_key = hmac.digest(salted_password, b"Server Key", digest)
        return cls(mechanism, salt, stored_key, server_key, iterations)

    @classmethod
    def from_password(
        cls, mechanism: str, password: str, iterations: int = MIN_ITERATIONS
    ) -> ScramCredential:
        salt = os.urandom(SALT_BYTES)
        return cls.from_salted_password(
            mechanism, salt, salted_password(mechanism, password, salt, iterations), iterations
        )

    def matches(self, password: str) -> bool:
        """Whether ``password`` is the one this credential was made from (a PLAIN check)."""
        other = ScramCredential.from_salted_password(
            self.mechanism,
            self.salt,
            salted_password(self.mechanism, password, self.salt, self.iterations),
            self.iterations,
        )
        return hmac.compare_digest(other.stored_key, self.stored_key)

    def auth_info(self) -> tuple[bytes, bytes, bytes, int]:
        """The tuple ``scramp``'s server side asks for."""
        return self.salt, self.stored_key, self.server_key, self.iterations


def salted_password(mechanism: str, password: str, salt: bytes, iterations: int) -> bytes:
    """Hi(Normalize(password), salt, i) of RFC 5802 (PBKDF2 with the mechanism's hash)."""
    return hashlib.pbkdf2_hmac(
        SCRAM_MECHANISMS[mechanism], password.encode("utf-8"), salt, iterations
    )
