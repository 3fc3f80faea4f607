"""The APIs a broker serves, under Kafka's API key numbers, and the versions of each it supports."""

from __future__ import annotations

from enum import IntEnum

from odradek.errors import UnsupportedVersionError


class ApiKey(IntEnum):
    """Kafka's API keys for the requests odradek speaks."""

    PRODUCE = 0
    FETCH = 1
    LIST_OFFSETS = 2
    METADATA = 3
    OFFSET_COMMIT = 8
    OFFSET_FETCH = 9
    FIND_COORDINATOR = 10
    JOIN_GROUP = 11
    HEARTBEAT = 12
    LEAVE_GROUP = 13
    SYNC_GROUP = 14
    DESCRIBE_GROUPS = 15
    LIST_GROUPS = 16
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    DELETE_RECORDS = 21
    INIT_PRODUCER_ID = 22
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    TXN_OFFSET_COMMIT = 28
    DESCRIBE_CONFIGS = 32
    ALTER_CONFIGS = 33
    SASL_AUTHENTICATE = 36
    CREATE_PARTITIONS = 37
    DELETE_GROUPS = 42
    OFFSET_DELETE = 47
    DESCRIBE_CLIENT_QUOTAS = 48
    ALTER_CLIENT_QUOTAS = 49
    DESCRIBE_CLUSTER = 60
    DESCRIBE_PRODUCERS = 61
    DESCRIBE_TRANSACTIONS = 65
    LIST_TRANSACTIONS = 66
    DESCRIBE_TOPIC_PARTITIONS = 75

    @property
    def display_name(self) -> str:
        """Kafka's CamelCase name of the API, e.g. ``ListOffsets``."""
        return "".join(word.capitalize() for word in self.name.split("_"))


SUPPORTED_VERSIONS: dict[ApiKey, tuple[int, int]] = {
    **{api_key: (0, 0) for api_key in ApiKey},
    # v1 of these carries Kafka's request data (protocol/kafka_data.py), v0 odradek's own.
    ApiKey.FIND_COORDINATOR: (0, 1),
    ApiKey.INIT_PRODUCER_ID: (0, 1),
}
"""``(min_version, max_version)`` of every API this protocol module encodes and decodes."""


def check_supported(api_key: int, api_version: int) -> ApiKey:
    """``api_key`` as an ApiKey if this version of it is supported, else UnsupportedVersionError.

    The message names the supported range so a client can tell what to retry with.
    """
    try:
        api = ApiKey(api_key)
    except ValueError:
        raise UnsupportedVersionError(f"unknown API key {api_key}") from None
    min_version, max_version = SUPPORTED_VERSIONS[api]
    if not min_version <= api_version <= max_version:
        raise UnsupportedVersionError(
            f"{api.display_name} v{api_version} is not supported; "
            f"supported versions are v{min_version}..v{max_version}"
        )
    return api
