"""Kafka-data messages: msgpack messages whose fields are a Kafka API's request or response data.

Most msgpack messages have odradek's own fields (one dataclass an API). The APIs listed in
:data:`KAFKA_DATA_VERSIONS` instead carry the data of one fixed version of Kafka's own message
(Kafka's field names, snake_case, as its message specs give them), so the broker answers them
with its Kafka handler for that API, unchanged: one generic codec serves every such API, and an
API joins by a line in that table. In memory the data is the Kafka request model the Kafka
handlers read and write (the plain values of ``protocol/kafka/message_codec``: dicts by kio's
field names, lists, ints, strings, bytes, UUIDs); on the wire it is a msgpack map:

- a struct is a map and an array a msgpack array; strings, booleans and integers are
  themselves (integers checked against the Kafka type's range), ``float64`` a float,
  ``bytes``/``records`` msgpack bin, ``uuid`` 16 bytes of bin; nullable fields take nil;
- the wire key is Kafka's field name in snake_case: kio's name, with ``_ms`` on the durations
  and times kio shortens (``transaction_timeout`` is ``transaction_timeout_ms`` on the wire);
- a field may be left out when Kafka's spec gives it a default, when it is nullable (nil) or
  tagged; the others are required. Unknown keys are ignored (the request's envelope keys
  share the map).

Decoding checks every field and raises InvalidRequestError naming the first bad one by its
path, e.g. ``topics[0].partitions[1] must be an int32, got str 'x'``.
"""

from __future__ import annotations

import dataclasses
import reprlib
import uuid
from collections.abc import Mapping
from functools import cache
from typing import Any, ClassVar, Self

from odradek.errors import InvalidRequestError
from odradek.int_limits import INT16_MAX, INT16_MIN, INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.kafka.message_codec import (
    EntitySpec,
    FieldSpec,
    read_defaults,
    request_spec,
    response_spec,
)
from odradek.protocol.schema import EMPTY_PAYLOAD, Message
from odradek.protocol.values.wire_types import Payload

KAFKA_DATA_VERSIONS: dict[tuple[ApiKey, int], int] = {
    # (API, msgpack version): the Kafka version whose data that msgpack version carries.
    # Kafka 4.4's latest version a client sends, except where odradek's Kafka listener
    # serves an older one with the same fields (FindCoordinator v5-6, DescribeCluster v2's
    # fenced brokers), AddPartitionsToTxn (v4+ are broker-to-broker batches; clients send
    # v3) and TxnOffsetCommit (v6 names topics by id only).
    (ApiKey.FIND_COORDINATOR, 1): 4,
    (ApiKey.INIT_PRODUCER_ID, 1): 5,
    (ApiKey.ADD_PARTITIONS_TO_TXN, 0): 3,
    (ApiKey.ADD_OFFSETS_TO_TXN, 0): 4,
    (ApiKey.END_TXN, 0): 5,
    (ApiKey.TXN_OFFSET_COMMIT, 0): 5,
    (ApiKey.DESCRIBE_CLUSTER, 0): 1,
    (ApiKey.DESCRIBE_PRODUCERS, 0): 0,
    (ApiKey.DESCRIBE_TRANSACTIONS, 0): 0,
    (ApiKey.LIST_TRANSACTIONS, 0): 2,
}

_TIME_TYPES = frozenset({"timedelta_i32", "timedelta_i64", "datetime_i64"})
"""kio's types for Kafka's ``...Ms`` fields, whose names it shortens by the ``Ms``."""

_RENAMED = {("TxnOffsetCommitRequest", "generation_id"): "generation_id_or_member_epoch"}
"""Fields Kafka 4.4's specs name otherwise than kio's (older) schemas: their Kafka name."""

_RANGES = {
    "int8": (-(2**7), 2**7 - 1, "an int8"),
    "int16": (INT16_MIN, INT16_MAX, "an int16"),
    "error_code": (INT16_MIN, INT16_MAX, "an int16"),
    "int32": (INT32_MIN, INT32_MAX, "an int32"),
    "timedelta_i32": (INT32_MIN, INT32_MAX, "an int32"),
    "int64": (INT64_MIN, INT64_MAX, "an int64"),
    "timedelta_i64": (INT64_MIN, INT64_MAX, "an int64"),
    "datetime_i64": (INT64_MIN, INT64_MAX, "an int64"),
    "uint8": (0, 2**8 - 1, "a uint8"),
    "uint16": (0, 2**16 - 1, "a uint16"),
    "uint32": (0, 2**32 - 1, "a uint32"),
    "uint64": (0, 2**64 - 1, "a uint64"),
}


def wire_key(entity: EntitySpec, field: FieldSpec) -> str:
    """The msgpack key of a Kafka field: Kafka's name for it, in snake_case."""
    renamed = _RENAMED.get((entity.name, field.name))
    if renamed is not None:
        return renamed
    return field.name + "_ms" if field.kafka_type in _TIME_TYPES else field.name


# --- the Kafka model to the wire ----------------------------------------------------------------


def to_wire(spec: EntitySpec, values: Mapping[str, Any]) -> dict[str, Any]:
    """The msgpack map of one struct; fields missing from ``values`` take their defaults."""
    defaults: dict[str, Any] | None = None
    out = {}
    for field in (*spec.fields, *spec.tagged.values()):
        if field.name in values:
            value = values[field.name]
        else:
            if defaults is None:
                defaults = read_defaults(spec)
            value = defaults[field.name]
        out[wire_key(spec, field)] = _wire_value(field, value)
    return out


def _wire_value(field: FieldSpec, value: Any) -> Any:
    if value is None:
        return None
    if field.is_array:
        return [_wire_one(field, item) for item in value]
    return _wire_one(field, value)


def _wire_one(field: FieldSpec, value: Any) -> Any:
    if value is None:
        return None
    if field.entity is not None:
        return to_wire(field.entity, value)
    kafka_type = field.kafka_type
    if kafka_type == "uuid":
        return value.bytes
    if kafka_type in ("bytes", "records"):
        return bytes(value)
    if kafka_type == "float64":
        return float(value)
    return value


# --- the wire to the Kafka model ----------------------------------------------------------------


def from_wire(spec: EntitySpec, value: Any, path: str = "") -> dict[str, Any]:
    """One struct of ``spec`` from its msgpack map, every field checked and defaults filled
    in; InvalidRequestError names the first bad field by its path."""
    if type(value) is not dict:
        raise _invalid(path or "message", "a map", value)
    out = {}
    for field in (*spec.fields, *spec.tagged.values()):
        key = wire_key(spec, field)
        where = f"{path}.{key}" if path else key
        if key in value:
            out[field.name] = _read_value(field, value[key], where)
        elif field.default is not dataclasses.MISSING or field.tag is not None:
            out[field.name] = read_defaults(spec)[field.name]
        elif field.nullable:
            out[field.name] = None
        else:
            raise InvalidRequestError(f"{where} is missing")
    return out


def _read_value(field: FieldSpec, value: Any, path: str) -> Any:
    if value is None and field.nullable:
        return None
    if field.is_array:
        if type(value) is not list:
            raise _invalid(path, "an array", value)
        return [_read_one(field, item, f"{path}[{index}]") for index, item in enumerate(value)]
    return _read_one(field, value, path)


def _read_one(field: FieldSpec, value: Any, path: str) -> Any:
    if field.entity is not None:
        return from_wire(field.entity, value, path)
    kafka_type = field.kafka_type
    bounds = _RANGES.get(kafka_type)
    if bounds is not None:
        minimum, maximum, name = bounds
        if type(value) is not int or not minimum <= value <= maximum:
            raise _invalid(path, name, value)
        return value
    if kafka_type == "string":
        if type(value) is not str:
            raise _invalid(path, "a string", value)
        return value
    if kafka_type == "bool":
        if type(value) is not bool:
            raise _invalid(path, "a boolean", value)
        return value
    if kafka_type in ("bytes", "records"):
        if type(value) is not bytes:
            raise _invalid(path, "bytes (msgpack bin)", value)
        return value
    if kafka_type == "float64":
        if type(value) not in (float, int):
            raise _invalid(path, "a number", value)
        return float(value)
    if kafka_type == "uuid":
        if type(value) is not bytes or len(value) != 16:
            raise _invalid(path, "a uuid (16 bytes of msgpack bin)", value)
        return uuid.UUID(bytes=value)
    raise TypeError(f"no wire type for Kafka type {kafka_type!r}")


def _invalid(path: str, expected: str, value: Any) -> InvalidRequestError:
    shown = reprlib.repr(value)
    return InvalidRequestError(f"{path} must be {expected}, got {type(value).__name__} {shown}")


# --- the messages -------------------------------------------------------------------------------


@dataclasses.dataclass(frozen=True)
class KafkaData(Message):
    """A request or response that carries Kafka's data for ``kafka_version`` of ``api_key``
    (base of the classes :func:`kafka_data_request` and :func:`kafka_data_response` make)."""

    kafka_version: ClassVar[int]
    spec: ClassVar[EntitySpec]
    data: Mapping[str, Any]

    def encode(self, parts: list[Payload]) -> dict[str, Any]:
        return to_wire(self.spec, self.data)

    @classmethod
    def from_header(cls, header: Mapping[str, Any], payload: memoryview = EMPTY_PAYLOAD) -> Self:
        if len(payload):
            raise InvalidRequestError(
                f"{len(payload)} payload bytes are not covered by any size field"
            )
        return cls(from_wire(cls.spec, header))


@cache
def kafka_data_request(api_key: ApiKey, api_version: int) -> type[KafkaData]:
    """The request message of msgpack ``api_version`` of ``api_key`` (one of
    :data:`KAFKA_DATA_VERSIONS`)."""
    return _message_class(api_key, api_version, "Request", request_spec)


@cache
def kafka_data_response(api_key: ApiKey, api_version: int) -> type[KafkaData]:
    """The response message of msgpack ``api_version`` of ``api_key``."""
    return _message_class(api_key, api_version, "Response", response_spec)


def _message_class(api_key: ApiKey, api_version: int, kind: str, spec_of: Any) -> type[KafkaData]:
    kafka_version = KAFKA_DATA_VERSIONS[api_key, api_version]
    name = f"{api_key.display_name}{kind}V{api_version}"
    return type(
        name,
        (KafkaData,),
        {
            "__doc__": f"{api_key.display_name} {kind.lower()} data of Kafka's "
            f"v{kafka_version}, as msgpack v{api_version}.",
            "__module__": __name__,
            "api_key": api_key,
            "wire_version": api_version,
            "kafka_version": kafka_version,
            "spec": spec_of(api_key, kafka_version),
        },
    )
