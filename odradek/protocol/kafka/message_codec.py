"""MessageCodec: Kafka request and response bodies to and from plain values, by schema.

The schemas are the ``kio`` package's classes (one per API, version and message, generated
from Kafka's JSON message specs): their fields give each field's Kafka type, nullability, tag
and default, and the class says whether the version is flexible (compact strings and arrays,
tagged fields). kio's own native reader is not used on requests: it allocates what a length
prefix asks before checking the bytes exist, so a 5-byte request can abort the process. The
reader here is bounded (:class:`ByteReader`) and pure Python.

Values are plain: a struct is a ``dict`` from field name to value, an array a ``list``;
integers (also millisecond durations and error codes) are ``int``; strings ``str``; bytes and
records ``memoryview`` when read, anything with ``len()`` when written (a file region goes out
as its own payload piece, for ``sendfile``). Fields missing from a dict being written take the
schema's default.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
import struct
import types
import uuid
from collections.abc import Sized
from functools import cache
from typing import Any, Union, get_args, get_origin, get_type_hints

from kio.index import load_request_schema, load_response_schema

from odradek.protocol.kafka.byte_reader import ByteReader

Payload = Sized

_INT = {
    "int8": ">b",
    "int16": ">h",
    "int32": ">i",
    "int64": ">q",
    "uint8": ">B",
    "uint16": ">H",
    "uint32": ">I",
    "uint64": ">Q",
    "error_code": ">h",
    "timedelta_i32": ">i",
    "timedelta_i64": ">q",
    "datetime_i64": ">q",
    "float64": ">d",
}
_STRUCTS = {name: struct.Struct(fmt) for name, fmt in _INT.items()}
ZERO_UUID = uuid.UUID(int=0)


@dataclasses.dataclass(frozen=True)
class FieldSpec:
    """One field of a message as its schema gives it."""

    name: str
    kafka_type: str | None  # None for a struct (or array of structs)
    is_array: bool
    nullable: bool
    tag: int | None
    entity: EntitySpec | None
    default: Any


@dataclasses.dataclass(frozen=True)
class EntitySpec:
    """A message or struct: its fields in wire order and its tagged fields by tag."""

    name: str
    flexible: bool
    fields: tuple[FieldSpec, ...]
    tagged: dict[int, FieldSpec]


def _plain(value: Any) -> Any:
    """A kio default as a plain value."""
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    if isinstance(value, datetime.datetime):
        return round(value.timestamp() * 1000)
    if isinstance(value, tuple):
        return [_plain(item) for item in value]
    return value


@cache
def entity_spec(cls: type) -> EntitySpec:
    """The codec's view of the kio class ``cls`` (built once per class)."""
    hints = get_type_hints(cls)
    flexible = bool(cls.__flexible__)
    fields, tagged = [], {}
    for field in dataclasses.fields(cls):
        hint = hints[field.name]
        nullable = False
        is_array = False
        if get_origin(hint) in (types.UnionType, Union):
            args = [arg for arg in get_args(hint) if arg is not type(None)]
            nullable, hint = True, args[0]
        if get_origin(hint) is tuple:
            is_array, hint = True, get_args(hint)[0]
            if get_origin(hint) in (types.UnionType, Union):
                hint = [arg for arg in get_args(hint) if arg is not type(None)][0]
        entity = entity_spec(hint) if dataclasses.is_dataclass(hint) else None
        if field.default is not dataclasses.MISSING:
            default = _plain(field.default)
        elif field.default_factory is not dataclasses.MISSING:
            default = _plain(field.default_factory())
        else:
            default = dataclasses.MISSING
        tag = field.metadata.get("tag")
        spec = FieldSpec(
            field.name,
            None if entity is not None else field.metadata["kafka_type"],
            is_array,
            nullable and tag is None,
            tag,
            entity,
            default,
        )
        if tag is None:
            fields.append(spec)
        else:
            tagged[int(tag)] = spec
    return EntitySpec(cls.__name__, flexible, tuple(fields), dict(sorted(tagged.items())))


@cache
def request_spec(api_key: int, version: int) -> EntitySpec:
    added = _NEWER_THAN_KIO.get((api_key, version, "request"))
    if added is not None:
        below = request_spec(api_key, version - 1)
        return dataclasses.replace(below, fields=below.fields + added)
    if (api_key, version) in _TOPIC_IDS_NEWER_THAN_KIO:
        return _topics_by_id(request_spec(api_key, version - 1))
    return entity_spec(load_request_schema(api_key, version))


@cache
def response_spec(api_key: int, version: int) -> EntitySpec:
    added = _NEWER_THAN_KIO.get((api_key, version, "response"))
    if added is not None:
        below = response_spec(api_key, version - 1)
        return dataclasses.replace(below, fields=below.fields + added)
    if (api_key, version) in _TOPIC_IDS_NEWER_THAN_KIO:
        return _topics_by_id(response_spec(api_key, version - 1))
    return entity_spec(load_response_schema(api_key, version))


_TOPIC_IDS_NEWER_THAN_KIO = {(28, 6)}
"""Versions kio does not know that are the version before with each ``topics`` entry's
``name`` (string) replaced by ``topic_id`` (uuid), in request and response: TxnOffsetCommit
v6 (Kafka 4.4)."""


def _topics_by_id(below: EntitySpec) -> EntitySpec:
    topic_id = FieldSpec("topic_id", "uuid", False, False, None, None, ZERO_UUID)
    fields = []
    for field in below.fields:
        if field.name == "topics" and field.entity is not None:
            entity = field.entity
            named = tuple(topic_id if f.name == "name" else f for f in entity.fields)
            field = dataclasses.replace(field, entity=dataclasses.replace(entity, fields=named))
        fields.append(field)
    return dataclasses.replace(below, fields=tuple(fields))


_NEWER_THAN_KIO: dict[tuple[int, int, str], tuple[FieldSpec, ...]] = {
    # ApiVersions v5 (KIP-1242): the request adds ClusterId (nullable string) and NodeId
    # (int32, default -1), the cluster and node the client means to reach; the response is v4's.
    (18, 5, "request"): (
        FieldSpec("cluster_id", "string", False, True, None, None, None),
        FieldSpec("node_id", "int32", False, False, None, None, -1),
    ),
    (18, 5, "response"): (),
}
"""Versions Kafka 4.4's message specs have and kio's schemas do not yet: each is the version
below it with the fields the spec appends (only versions that append plain fields)."""


# --- reading ---------------------------------------------------------------------------------


def read_entity(reader: ByteReader, spec: EntitySpec, path: str = "") -> dict[str, Any]:
    """Read one struct of ``spec``; raises InvalidRequestError naming the field."""
    values: dict[str, Any] = {}
    for field in spec.fields:
        values[field.name] = _read_field(reader, field, spec.flexible, f"{path}{field.name}")
    if spec.flexible:
        _read_tagged(reader, spec, values, path)
    for field in spec.tagged.values():
        if field.name not in values:
            values[field.name] = _default_value(field)
    return values


def _read_tagged(reader: ByteReader, spec: EntitySpec, values: dict, path: str) -> None:
    what = f"{path}tagged fields"
    for tag, size in reader.tagged_fields(what):
        field = spec.tagged.get(tag)
        if field is None:
            reader.skip(size, f"{what} tag {tag}")
            continue
        end = reader.position + size
        sub = reader.sub_reader(end)
        values[field.name] = _read_field(sub, field, True, f"{path}{field.name}")
        if sub.position != end:
            raise sub.fail(f"tagged field {path}{field.name} has {end - sub.position} extra bytes")
        reader.position = end


def _read_field(reader: ByteReader, field: FieldSpec, flexible: bool, path: str) -> Any:
    if field.is_array:
        size = reader.length(flexible, field.nullable, path)
        if size is None:
            return None
        return [_read_one(reader, field, flexible, f"{path}[{index}]") for index in range(size)]
    return _read_one(reader, field, flexible, path)


def _read_one(reader: ByteReader, field: FieldSpec, flexible: bool, path: str) -> Any:
    if field.entity is not None:
        if field.nullable and not field.is_array:
            if reader.int8(path) < 0:
                return None
        return read_entity(reader, field.entity, path + ".")
    kafka_type = field.kafka_type
    fmt = _STRUCTS.get(kafka_type)
    if fmt is not None:  # the numbers: most fields
        start = reader.position
        reader.skip(fmt.size, path)
        return reader.unpack(fmt, start)
    nullable = field.nullable and not field.is_array
    if kafka_type == "string":
        return reader.string(flexible, nullable, path)
    if kafka_type in ("bytes", "records"):
        return reader.bytes_view(flexible, nullable, path)
    if kafka_type == "bool":
        return reader.boolean(path)
    return reader.uuid(path)


def _default_value(field: FieldSpec) -> Any:
    if field.default is not dataclasses.MISSING:
        return field.default
    if field.is_array:
        return []
    if field.entity is not None:
        return None if field.nullable else read_defaults(field.entity)
    if field.nullable:
        return None
    return _implicit_default(field.kafka_type)


def read_defaults(spec: EntitySpec) -> dict[str, Any]:
    """A struct of ``spec`` with every field at its default."""
    return {f.name: _default_value(f) for f in (*spec.fields, *spec.tagged.values())}


def _implicit_default(kafka_type: str | None) -> Any:
    if kafka_type == "string":
        return ""
    if kafka_type in ("bytes", "records"):
        return b""
    if kafka_type == "bool":
        return False
    if kafka_type == "uuid":
        return ZERO_UUID
    if kafka_type == "float64":
        return 0.0
    return 0


# --- writing ---------------------------------------------------------------------------------


class PartsWriter:
    """Bytes written in order; a non-bytes payload (a file region) becomes a part of its own."""

    __slots__ = ("buffer", "parts")

    def __init__(self) -> None:
        self.buffer = bytearray()
        self.parts: list[Payload] = []

    def region(self, payload: Payload) -> None:
        if self.buffer:
            self.parts.append(bytes(self.buffer))
            self.buffer = bytearray()
        self.parts.append(payload)

    def finish(self) -> list[Payload]:
        if self.buffer:
            self.parts.append(bytes(self.buffer))
            self.buffer = bytearray()
        return self.parts

    def finish_frame(self) -> list[Payload]:
        """The parts of a frame whose first 4 bytes were left for its size: the size written
        there. Without a file region the frame is one piece of bytes."""
        buffer = self.buffer
        parts = self.parts
        if not parts:
            _FRAME_SIZE.pack_into(buffer, 0, len(buffer) - 4)
            return [bytes(buffer)]
        if buffer:
            parts.append(bytes(buffer))
            self.buffer = bytearray()
        parts[0] = _FRAME_SIZE.pack(sum(map(len, parts)) - 4) + parts[0][4:]
        return parts


_FRAME_SIZE = struct.Struct(">i")


def write_unsigned_varint(buffer: bytearray, value: int) -> None:
    while value > 0x7F:
        buffer.append((value & 0x7F) | 0x80)
        value >>= 7
    buffer.append(value)


def write_entity(out: PartsWriter, spec: EntitySpec, values: dict[str, Any]) -> None:
    """Write one struct of ``spec``; fields missing from ``values`` take their defaults."""
    for field in spec.fields:
        value = values.get(field.name, dataclasses.MISSING)
        if value is dataclasses.MISSING:
            value = _default_value(field)
        _write_field(out, field, spec.flexible, value)
    if not spec.flexible:
        return
    present = []
    for tag, field in spec.tagged.items():
        value = values.get(field.name, dataclasses.MISSING)
        if value is dataclasses.MISSING or value == _default_value(field):
            continue
        present.append((tag, field, value))
    write_unsigned_varint(out.buffer, len(present))
    for tag, field, value in present:
        sub = PartsWriter()
        _write_field(sub, field, True, value)
        data = b"".join(bytes(part) for part in sub.finish())
        write_unsigned_varint(out.buffer, tag)
        write_unsigned_varint(out.buffer, len(data))
        out.buffer += data


def _write_length(buffer: bytearray, size: int | None, flexible: bool, short: bool) -> None:
    if flexible:
        write_unsigned_varint(buffer, 0 if size is None else size + 1)
    elif short:
        buffer += struct.pack(">h", -1 if size is None else size)
    else:
        buffer += struct.pack(">i", -1 if size is None else size)


def _write_field(out: PartsWriter, field: FieldSpec, flexible: bool, value: Any) -> None:
    if field.is_array:
        if value is None:
            _write_length(out.buffer, None, flexible, False)
            return
        _write_length(out.buffer, len(value), flexible, False)
        for item in value:
            _write_one(out, field, flexible, item, False)
        return
    _write_one(out, field, flexible, value, field.nullable)


def _write_one(out: PartsWriter, field: FieldSpec, flexible: bool, value: Any, nullable: bool):
    buffer = out.buffer
    if field.entity is not None:
        if nullable:
            if value is None:
                buffer.append(0xFF)
                return
            buffer.append(1)
        write_entity(out, field.entity, value)
        return
    kafka_type = field.kafka_type
    fmt = _STRUCTS.get(kafka_type)
    if fmt is not None:  # the numbers: most fields
        buffer += fmt.pack(-1 if value is None else value)
    elif kafka_type == "string":
        encoded = None if value is None else value.encode()
        _write_length(buffer, None if encoded is None else len(encoded), flexible, True)
        if encoded:
            out.buffer += encoded
    elif kafka_type in ("bytes", "records"):
        _write_length(buffer, None if value is None else len(value), flexible, False)
        if value is not None and len(value):
            if isinstance(value, bytes | bytearray | memoryview):
                out.buffer += value
            else:
                out.region(value)
    elif kafka_type == "bool":
        buffer.append(1 if value else 0)
    else:  # uuid
        buffer += (value or ZERO_UUID).bytes


def encode_parts(spec: EntitySpec, values: dict[str, Any]) -> list[Payload]:
    out = PartsWriter()
    write_entity(out, spec, values)
    return out.finish()


def decode(spec: EntitySpec, data: memoryview, position: int = 0) -> dict[str, Any]:
    """Read a whole message. Bytes after it are ignored, as Kafka's brokers do (librdkafka
    sends three after an all-topics Metadata v12)."""
    return read_entity(ByteReader(data, position), spec)
