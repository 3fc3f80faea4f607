"""KafkaPrincipal: who a connection acts as (``User:alice``), as Kafka names principals."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

USER_TYPE = "User"


@dataclass(frozen=True)
class KafkaPrincipal:
    """A principal type and name; ``str()`` gives Kafka's ``Type:name`` form."""

    principal_type: str
    name: str

    def __str__(self) -> str:
        return f"{self.principal_type}:{self.name}"

    @classmethod
    def parse(cls, text: str) -> KafkaPrincipal:
        """``User:alice`` as a principal; raises ValueError without a ``Type:`` prefix."""
        principal_type, separator, name = text.strip().partition(":")
        if not separator or not principal_type or not name:
            raise ValueError(f"principal {text!r} is not Type:name (e.g. User:alice)")
        return cls(principal_type, name)

    @classmethod
    def user(cls, name: str) -> KafkaPrincipal:
        return cls(USER_TYPE, name)

    @classmethod
    def from_certificate(cls, peercert: dict[str, Any] | None) -> KafkaPrincipal:
        """The principal of a verified client certificate: ``User:`` and its subject in RFC
        2253 order (most specific first, ``CN=client,OU=eng,O=example``), as Kafka's default
        principal builder names it; ANONYMOUS without a certificate."""
        if not peercert or not peercert.get("subject"):
            return ANONYMOUS
        names = {
            "commonName": "CN",
            "organizationalUnitName": "OU",
            "organizationName": "O",
            "localityName": "L",
            "stateOrProvinceName": "ST",
            "countryName": "C",
            "streetAddress": "STREET",
            "domainComponent": "DC",
            "userId": "UID",
        }
        parts = []
        for rdn in reversed(peercert["subject"]):
            parts.append("+".join(f"{names.get(key, key)}={_escape(value)}" for key, value in rdn))
        return cls(USER_TYPE, ",".join(parts))


def _escape(value: str) -> str:
    escaped = "".join(f"\\{c}" if c in ',+"\\<>;=' else c for c in value)
    if escaped.startswith(("#", " ")):
        escaped = "\\" + escaped
    return escaped


ANONYMOUS = KafkaPrincipal(USER_TYPE, "ANONYMOUS")
