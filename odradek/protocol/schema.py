"""How message dataclasses map onto msgpack header maps, validating every field on the way in.

Every request and response body is a frozen dataclass deriving from :class:`Message` whose type
hints give each field's wire type (the role Kafka's JSON message specs play). A codec built from
those hints on first use turns an instance into a plain map and back. The field types
(``Int16``, ``Int32``, ``Int64``, ``NonNegativeInt32``, ``Records``, ``IntRange``) are the shared
values' (protocol/values/wire_types.py): a message may hold a value the Kafka side uses too.
Decoding checks every field's type and range and raises InvalidRequestError naming the field,
e.g. ``partitions[2].fetch_offset must be an int64, got str 'abc'``. The rules:

- A field with a default may be absent on the wire; a field without one is required. Keys that
  are not in the schema are ignored, so a newer peer may add fields.
- Integers carry an :class:`IntRange`; ``bool`` is a msgpack boolean (never an integer);
  ``str`` is a msgpack string; ``bytes`` is msgpack bin (opaque client data, relayed as
  is); ``float`` is a finite msgpack float or integer; an Enum travels as its value.
- ``X | None`` also accepts nil; ``tuple[X, ...]`` is an array; ``Mapping[str, X]`` a map with
  string keys; a nested dataclass is a map.
- A :data:`Records` field travels as its byte count under the key ``size``; its bytes are the
  frame payload, the Records fields of a message concatenated in order. Decoded Records are
  memoryviews into the frame; on encoding anything with ``len()`` will do (a broker may pass a
  file slice and write it with ``sendfile``).
- ``field(metadata={WIRE_KEY: "id"})`` gives a field a wire key other than its name.
- ``field(default=..., metadata={OMITTED_AT_DEFAULT: True})``: a field added to a message
  after its first release, left out of the map while it has its default, so the message is
  the same bytes as before wherever the field is not used.

The envelopes and the produce and fetch messages, a broker's every request, read their common
shape directly (every field present or absent, well typed, in range) and build their maps
directly; anything unusual goes to the schema walk (:func:`decode_message`), so bad input gets
the same error either way. Their tests hold them to :func:`decode_message` and
:func:`encode_message`, byte for byte.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import operator
import reprlib
import types
from collections.abc import Callable, Mapping
from functools import cache
from typing import (
    Annotated,
    Any,
    ClassVar,
    Self,
    TypeVar,
    Union,
    get_args,
    get_origin,
    get_type_hints,
)

from odradek.errors import InvalidRequestError
from odradek.int_limits import INT32_MAX
from odradek.protocol.values.wire_types import (
    OMITTED_AT_DEFAULT,
    IntRange,
    Payload,
    RecordsMarker,
)
from odradek.protocol.values.wire_types import (  # for the messages' tests, as before
    stored_at_once as stored_at_once,
)

WIRE_KEY = "wire_key"
"""Field metadata key that renames a field on the wire."""

RECORDS_SIZE_KEY = "size"

EMPTY_PAYLOAD = memoryview(b"")

MessageT = TypeVar("MessageT", bound="Message")


class Message:
    """Base of everything that travels as a header map: request and response bodies, envelopes.

    Subclasses are frozen dataclasses with wire-typed fields; bodies also name their ``api_key``.
    """

    api_key: ClassVar[int]
    wire_version: ClassVar[int] = 0
    """The version of its API this message is (the request header's ``v``)."""

    def to_header(self) -> dict[str, Any]:
        """This message's fields as a header map (Records fields as their sizes)."""
        return self.encode([])

    def payload_parts(self) -> list[Payload]:
        """The Records fields' contents, in the order they form the frame payload."""
        parts: list[Payload] = []
        self.encode(parts)
        return parts

    def encode(self, parts: list[Payload]) -> dict[str, Any]:
        """The header map, as ``to_header``; the payload pieces appended to ``parts`` in
        order, as ``payload_parts``: both in one pass."""
        return encode_message(self, parts)

    @classmethod
    def from_header(cls, header: Mapping[str, Any], payload: memoryview = EMPTY_PAYLOAD) -> Self:
        """Decode and validate a message from a frame's header and payload.

        Raises InvalidRequestError naming the first bad field, or when the Records sizes do
        not add up to exactly the payload.
        """
        return decode_message(cls, header, payload)


def encode_message(message: Message, parts: list[Payload]) -> dict[str, Any]:
    """``message`` as a header map by its schema, its payload pieces appended to ``parts``.

    What ``Message.encode`` does unless a message type builds its map directly (the hottest
    responses do, and their tests hold them to this function).
    """
    return _struct_codec(type(message)).encode(message, parts)


def decode_message(
    cls: type[MessageT], header: Mapping[str, Any], payload: memoryview = EMPTY_PAYLOAD
) -> MessageT:
    """Decode and validate a ``cls`` by its schema, every field checked in order; raises
    InvalidRequestError naming the first bad field.

    What ``Message.from_header`` does unless a message type reads its common shape directly
    (the hottest requests do, falling back to this for anything else, so bad input gets the
    same error either way; their tests hold them to this function).
    """
    reader = _PayloadReader(payload)
    try:
        message = _struct_codec(cls).decode(header, reader)
    except _DecodeError as error:
        raise error.request_error() from None
    reader.check_consumed()
    return message


class _PayloadReader:
    """Hands out consecutive slices of a frame payload to the Records fields being decoded."""

    def __init__(self, payload: memoryview) -> None:
        self._payload = payload
        self._position = 0

    def take(self, size: int) -> memoryview:
        end = self._position + size
        if end > len(self._payload):
            raise _DecodeError(
                f"is {size} but only {len(self._payload) - self._position} payload bytes are left"
            )
        piece = self._payload[self._position : end]
        self._position = end
        return piece

    def check_consumed(self) -> None:
        left = len(self._payload) - self._position
        if left:
            raise InvalidRequestError(f"{left} payload bytes are not covered by any size field")


class _DecodeError(Exception):
    """A field that does not decode: what is wrong with it, and where. The codecs say what;
    each one it is nested in adds its step of the path on the way out (``at``), so decoding
    spends nothing on paths until a field is wrong."""

    def __init__(self, problem: str) -> None:
        super().__init__(problem)
        self.problem = problem
        self.steps: list[str] = []  # innermost first: ".fetch_offset", "[2]", ".partitions"

    def at(self, step: str) -> _DecodeError:
        self.steps.append(step)
        return self

    def request_error(self) -> InvalidRequestError:
        path = "".join(reversed(self.steps)).removeprefix(".")
        return InvalidRequestError(f"{path or 'message'} {self.problem}")


def _invalid(expected: str, value: Any) -> _DecodeError:
    shown = reprlib.repr(value)
    return _DecodeError(f"must be {expected}, got {type(value).__name__} {shown}")


class _IntCodec:
    def __init__(self, bounds: IntRange) -> None:
        self._bounds = bounds

    def encode(self, value: int, parts: list[Payload]) -> int:
        return value

    def decode(self, value: Any, reader: _PayloadReader) -> int:
        if type(value) is not int or not self._bounds.minimum <= value <= self._bounds.maximum:
            raise _invalid(self._bounds.name, value)
        return value


class _ExactTypeCodec:
    """bool and str: the value must be exactly that msgpack type."""

    def __init__(self, python_type: type, name: str) -> None:
        self._type = python_type
        self._name = name

    def encode(self, value: Any, parts: list[Payload]) -> Any:
        return value

    def decode(self, value: Any, reader: _PayloadReader) -> Any:
        if type(value) is not self._type:
            raise _invalid(self._name, value)
        return value


class _FloatCodec:
    """float: a msgpack float, or an integer (a whole number a client wrote as one)."""

    def encode(self, value: float, parts: list[Payload]) -> Any:
        return float(value)

    def decode(self, value: Any, reader: _PayloadReader) -> float:
        if type(value) not in (float, int) or not math.isfinite(value):
            raise _invalid("a finite number", value)
        return float(value)


class _EnumCodec:
    def __init__(self, enum_type: type[enum.Enum]) -> None:
        self._type = enum_type
        self._choices = " or ".join(repr(member.value) for member in enum_type)

    def encode(self, value: enum.Enum, parts: list[Payload]) -> Any:
        return value.value

    def decode(self, value: Any, reader: _PayloadReader) -> enum.Enum:
        if type(value) not in (int, str):
            raise _invalid(self._choices, value)
        try:
            return self._type(value)
        except ValueError:
            raise _invalid(self._choices, value) from None


class _OptionalCodec:
    def __init__(self, inner: _Codec) -> None:
        self._inner = inner

    def encode(self, value: Any, parts: list[Payload]) -> Any:
        return None if value is None else self._inner.encode(value, parts)

    def decode(self, value: Any, reader: _PayloadReader) -> Any:
        return None if value is None else self._inner.decode(value, reader)


class _ArrayCodec:
    def __init__(self, item: _Codec) -> None:
        self._item = item

    def encode(self, value: tuple[Any, ...], parts: list[Payload]) -> list[Any]:
        return [self._item.encode(item, parts) for item in value]

    def decode(self, value: Any, reader: _PayloadReader) -> tuple[Any, ...]:
        if type(value) is not list:
            raise _invalid("an array", value)
        decode = self._item.decode
        items: list[Any] = []
        try:
            for item in value:
                items.append(decode(item, reader))
        except _DecodeError as error:
            raise error.at(f"[{len(items)}]") from None
        return tuple(items)


class _MapCodec:
    def __init__(self, value_codec: _Codec) -> None:
        self._value = value_codec

    def encode(self, value: Mapping[str, Any], parts: list[Payload]) -> dict[str, Any]:
        return {key: self._value.encode(item, parts) for key, item in value.items()}

    def decode(self, value: Any, reader: _PayloadReader) -> dict[str, Any]:
        if type(value) is not dict:
            raise _invalid("a map", value)
        decoded = {}
        for key, item in value.items():
            if type(key) is not str:
                raise _invalid("a string", key).at(" key")
            try:
                decoded[key] = self._value.decode(item, reader)
            except _DecodeError as error:
                raise error.at(f"[{key!r}]") from None
        return decoded


class _RecordsCodec:
    def encode(self, value: Payload, parts: list[Payload]) -> int:
        parts.append(value)
        return len(value)

    def decode(self, value: Any, reader: _PayloadReader) -> memoryview:
        if type(value) is not int or not 0 <= value <= INT32_MAX:
            raise _invalid("an int32 >= 0", value)
        return reader.take(value)


@dataclasses.dataclass(frozen=True)
class _FieldCodec:
    name: str
    key: str
    codec: _Codec
    required: bool
    omitted_at: Any = dataclasses.MISSING  # the default it is left out at, if it is


class _StructCodec:
    def __init__(self, cls: type) -> None:
        hints = get_type_hints(cls, include_extras=True)
        self._cls = cls
        self._fields = tuple(
            _field_codec(field, hints[field.name]) for field in dataclasses.fields(cls)
        )
        # Encoding reads every field at once and converts only those whose wire value is not
        # the Python value itself (enums, Records, arrays and nested structs), in field order.
        names = [f.name for f in self._fields]
        self._keys = tuple(f.key for f in self._fields)
        self._values: Callable[[Any], tuple[Any, ...]] = (
            operator.attrgetter(*names)
            if len(names) > 1
            else lambda value: tuple(getattr(value, name) for name in names)
        )
        self._decoders = tuple((f.name, f.key, f.codec.decode, f.required) for f in self._fields)
        self._converted = tuple(
            (index, f.key, f.codec.encode)
            for index, f in enumerate(self._fields)
            if not _is_plain(f.codec)
        )
        self._omitted = tuple(
            (index, f.key, f.omitted_at)
            for index, f in enumerate(self._fields)
            if f.omitted_at is not dataclasses.MISSING
        )

    def encode(self, value: Any, parts: list[Payload]) -> dict[str, Any]:
        values = self._values(value)
        header = dict(zip(self._keys, values, strict=True))
        for index, key, encode in self._converted:
            header[key] = encode(values[index], parts)
        for index, key, default in self._omitted:
            if values[index] == default:
                del header[key]
        return header

    def decode(self, value: Any, reader: _PayloadReader) -> Any:
        if type(value) is not dict:
            raise _invalid("a map", value)
        kwargs = {}
        for name, key, decode, required in self._decoders:
            if key in value:
                try:
                    kwargs[name] = decode(value[key], reader)
                except _DecodeError as error:
                    raise error.at("." + key) from None
            elif required:
                raise _DecodeError("is missing").at("." + key)
        return self._cls(**kwargs)


_Codec = (
    _IntCodec
    | _ExactTypeCodec
    | _FloatCodec
    | _EnumCodec
    | _OptionalCodec
    | _ArrayCodec
    | _MapCodec
    | _RecordsCodec
    | _StructCodec
)


def _is_plain(codec: _Codec) -> bool:
    """Whether ``codec`` encodes a value as itself (msgpack packs it as it is)."""
    if isinstance(codec, _OptionalCodec):
        return _is_plain(codec._inner)
    return isinstance(codec, _IntCodec | _ExactTypeCodec)


def _field_codec(field: dataclasses.Field[Any], hint: Any) -> _FieldCodec:
    codec = _codec_for(hint)
    key = RECORDS_SIZE_KEY if isinstance(codec, _RecordsCodec) else field.name
    required = field.default is dataclasses.MISSING and field.default_factory is dataclasses.MISSING
    omitted_at = field.default if field.metadata.get(OMITTED_AT_DEFAULT) else dataclasses.MISSING
    return _FieldCodec(field.name, field.metadata.get(WIRE_KEY, key), codec, required, omitted_at)


@cache
def _struct_codec(cls: type) -> _StructCodec:
    return _StructCodec(cls)


def _codec_for(hint: Any) -> _Codec:
    """The codec for one type hint; a hint outside the rules above is a programming error."""
    origin, args = get_origin(hint), get_args(hint)
    if origin is Annotated:
        for meta in args[1:]:
            if isinstance(meta, IntRange):
                return _IntCodec(meta)
            if isinstance(meta, RecordsMarker):
                return _RecordsCodec()
    elif origin in (Union, types.UnionType) and len(args) == 2 and type(None) in args:
        (inner,) = (arg for arg in args if arg is not type(None))
        return _OptionalCodec(_codec_for(inner))
    elif origin is tuple and len(args) == 2 and args[1] is Ellipsis:
        return _ArrayCodec(_codec_for(args[0]))
    elif origin in (Mapping, dict) and args[0] is str:
        return _MapCodec(_codec_for(args[1]))
    elif hint is bool:
        return _ExactTypeCodec(bool, "a boolean")
    elif hint is str:
        return _ExactTypeCodec(str, "a string")
    elif hint is float:
        return _FloatCodec()
    elif hint is bytes:
        return _ExactTypeCodec(bytes, "bytes (msgpack bin)")
    elif isinstance(hint, type) and issubclass(hint, enum.Enum):
        return _EnumCodec(hint)
    elif dataclasses.is_dataclass(hint):
        return _struct_codec(hint)
    raise TypeError(f"no wire type for {hint!r}")
