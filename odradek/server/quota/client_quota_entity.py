"""ClientQuotaEntity: who a quota applies to, and which quota applies to a client.

An entity names a user, a client id, or both; either may be the default (``None`` as a name,
``<default>`` on the command line), which applies to each user (or client id) without a quota
of its own. A client's quota of a type is the first one configured, in Kafka's order:
user and client id, user and default client id, user, default user and client id, default
user and default client id, default user, client id, default client id.
"""

from __future__ import annotations

from dataclasses import dataclass

USER, CLIENT_ID = "user", "client-id"
ENTITY_TYPES = (USER, CLIENT_ID)
DEFAULT_NAME = "<default>"

PRODUCER_BYTE_RATE = "producer_byte_rate"
CONSUMER_BYTE_RATE = "consumer_byte_rate"
REQUEST_PERCENTAGE = "request_percentage"
QUOTA_KEYS = (PRODUCER_BYTE_RATE, CONSUMER_BYTE_RATE, REQUEST_PERCENTAGE)

_UNSET = object()


@dataclass(frozen=True)
class ClientQuotaEntity:
    """``entries``: (entity type, name or None for the default), sorted by type."""

    entries: tuple[tuple[str, str | None], ...]

    @classmethod
    def of(cls, user: object = _UNSET, client_id: object = _UNSET) -> ClientQuotaEntity:
        """An entity of a user and/or a client id (None: the default one)."""
        entries = []
        if client_id is not _UNSET:
            entries.append((CLIENT_ID, client_id))
        if user is not _UNSET:
            entries.append((USER, user))
        return cls(tuple(entries))

    @classmethod
    def from_mapping(cls, mapping: dict[str, str | None]) -> ClientQuotaEntity:
        """From ``{"user": "alice", "client-id": None}``; raises ValueError for an unknown
        or repeated type, or no type at all."""
        unknown = set(mapping) - set(ENTITY_TYPES)
        if unknown or not mapping:
            raise ValueError(
                f"unknown entity type {sorted(unknown)[0]!r}" if unknown else "empty entity"
            )
        for name in mapping.values():
            if name is not None and not isinstance(name, str):
                raise ValueError(f"entity name {name!r} is not a string")
        return cls(tuple(sorted(mapping.items())))

    def as_mapping(self) -> dict[str, str | None]:
        return dict(self.entries)

    def __str__(self) -> str:
        return ", ".join(
            f"{entity_type}={DEFAULT_NAME if name is None else name}"
            for entity_type, name in self.entries
        )


def candidates(user: str, client_id: str) -> tuple[ClientQuotaEntity, ...]:
    """The entities whose quota may apply to ``user`` with ``client_id``, most specific first."""
    return (
        ClientQuotaEntity(((CLIENT_ID, client_id), (USER, user))),
        ClientQuotaEntity(((CLIENT_ID, None), (USER, user))),
        ClientQuotaEntity(((USER, user),)),
        ClientQuotaEntity(((CLIENT_ID, client_id), (USER, None))),
        ClientQuotaEntity(((CLIENT_ID, None), (USER, None))),
        ClientQuotaEntity(((USER, None),)),
        ClientQuotaEntity(((CLIENT_ID, client_id),)),
        ClientQuotaEntity(((CLIENT_ID, None),)),
    )


def sensor_key(entity: ClientQuotaEntity, user: str, client_id: str) -> tuple[str, str]:
    """Whose usage a quota of ``entity`` counts together (Kafka's metric tags): the user's if
    the entity names a user (default or not), the client id's if it names a client id; all
    the clients sharing both share one rate."""
    types = {entity_type for entity_type, _ in entity.entries}
    return (user if USER in types else "", client_id if CLIENT_ID in types else "")


MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY = 0, 1, 2
"""Kafka's ClientQuotaFilterComponent match types."""


@dataclass(frozen=True)
class ClientQuotaFilterComponent:
    """One entity type to match: a name exactly, the default, or any (Kafka's
    ``ClientQuotaFilterComponent``)."""

    entity_type: str
    match_type: int
    match: str | None = None

    def matches(self, name: str | None) -> bool:
        if self.match_type == MATCH_EXACT:
            return name is not None and name == self.match
        if self.match_type == MATCH_DEFAULT:
            return name is None
        return True


def validate_filter(components: list[ClientQuotaFilterComponent]) -> None:
    """Raises ValueError for an unknown entity type or match type, or a type asked twice."""
    seen = set()
    for component in components:
        if component.entity_type not in ENTITY_TYPES:
            raise ValueError(f"unknown entity type {component.entity_type!r}")
        if component.match_type not in (MATCH_EXACT, MATCH_DEFAULT, MATCH_ANY):
            raise ValueError(f"unknown match type {component.match_type}")
        if component.match_type == MATCH_EXACT and component.match is None:
            raise ValueError(f"an exact match of {component.entity_type} needs a name")
        if component.entity_type in seen:
            raise ValueError(f"entity type {component.entity_type!r} is filtered twice")
        seen.add(component.entity_type)


def filter_matches(
    entity: ClientQuotaEntity, components: list[ClientQuotaFilterComponent], strict: bool
) -> bool:
    """Whether ``entity`` matches every component (and, ``strict``, has no other type)."""
    names = entity.as_mapping()
    for component in components:
        if component.entity_type not in names or not component.matches(
            names[component.entity_type]
        ):
            return False
    return not strict or len(names) == len(components)
