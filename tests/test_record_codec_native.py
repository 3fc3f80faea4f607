"""The clients' bulk record loops in C (``_record_codec``) against their Python twins.

The twins are the oracle, and they are themselves checked against the one-record codec
(write_record, decode_records): on generated records, and on generated, truncated and corrupt
sections, C and Python must write the same bytes, return the same records (or both None),
and raise the same errors.
"""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from odradek.client.consumer_record import ConsumerRecord
from odradek.int_limits import INT64_MAX
from odradek.record import _record_codec
from odradek.record.record import encode_record, write_record
from odradek.record.record_batch import TimestampType
from odradek.record.record_codec import py_read_records, py_write_records

fields = st.one_of(st.none(), st.binary(max_size=300))
header_lists = st.lists(
    st.tuples(st.text(max_size=8), st.one_of(st.none(), st.binary(max_size=20))), max_size=3
)


def both_write(out: bytes, *args):
    """Call both writers on copies of ``out``: (result or error type, bytes written)."""
    outcomes = []
    for write in (_record_codec.write_records, py_write_records):
        buffer = bytearray(out)
        try:
            result = write(buffer, *args)
        except (TypeError, ValueError, OverflowError) as error:
            result = type(error)
        outcomes.append((result, bytes(buffer)))
    return outcomes


@settings(max_examples=examples(300), deadline=None)
@given(
    values=st.lists(fields, max_size=40),
    with_keys=st.booleans(),
    data=st.data(),
    first_offset_delta=st.integers(0, 20_000),
    timestamp_delta=st.integers(-(2**40), 2**40),
    limit=st.integers(0, 6000),
    prefix=st.binary(max_size=70),
)
def test_write_records_matches_the_twin_and_write_record(
    values, with_keys, data, first_offset_delta, timestamp_delta, limit, prefix
) -> None:
    keys = data.draw(st.lists(fields, min_size=len(values), max_size=len(values)))
    keys = keys if with_keys else None
    start = data.draw(st.integers(0, len(values)))
    stop = data.draw(st.integers(start, len(values)))
    native, python = both_write(
        prefix, keys, values, start, stop, first_offset_delta, timestamp_delta, limit
    )
    assert native == python
    stopped_at, written = native
    expected = bytearray(prefix)
    for index in range(start, stopped_at):
        write_record(
            expected,
            first_offset_delta + index - start,
            timestamp_delta,
            None if keys is None else keys[index],
            values[index],
        )
    assert written == bytes(expected)
    if stopped_at < stop:  # the next record would not have fitted
        key = None if keys is None else keys[stopped_at]
        record = encode_record(
            first_offset_delta + stopped_at - start, timestamp_delta, key, values[stopped_at]
        )
        assert len(written) + len(record) > limit


@pytest.mark.parametrize(
    "args",
    [
        (None, [b"a", "text"], 0, 2, 0, 0, 1 << 20),  # a value that is not bytes
        ([b"k", 3], [b"a", b"b"], 0, 2, 0, 0, 1 << 20),  # a key that is not bytes
        ([b"k"], [b"a", b"b"], 0, 2, 0, 0, 1 << 20),  # keys shorter than values
        (None, (b"a",), 0, 1, 0, 0, 1 << 20),  # not a list
        (None, [b"a"], 0, 2, 0, 0, 1 << 20),  # stop past the end
        (None, [b"a"], 1, 0, 0, 0, 1 << 20),  # start after stop
        (None, [b"a"], 0, 1, -1, 0, 1 << 20),  # negative offset delta
        (None, [b"a", b"b"], 0, 2, 2**31 - 1, 0, 1 << 20),  # offset delta past int32
        (None, [b"a"], 0, 1, 0, INT64_MAX + 1, 1 << 20),  # timestamp delta past int64
    ],
)
def test_write_records_refuses_what_the_twin_refuses(args) -> None:
    native, python = both_write(b"", *args)
    assert native[0] == python[0]
    assert isinstance(native[0], type) and issubclass(native[0], Exception)
    assert native[1] == python[1] == b""


def test_write_records_needs_a_bytearray() -> None:
    with pytest.raises(TypeError):
        _record_codec.write_records(b"", None, [b"a"], 0, 1, 0, 0, 100)


# --- reading -----------------------------------------------------------------------------------

records_lists = st.lists(
    st.tuples(
        st.integers(-(2**40), 2**40), fields, fields, header_lists, st.integers(0, 3)
    ),  # timestamp delta, key, value, headers, gap to the previous offset
    max_size=25,
)


def section_of(records) -> tuple[bytes, int]:
    out = bytearray()
    offset_delta = 0
    for timestamp_delta, key, value, headers, gap in records:
        offset_delta += gap
        write_record(out, offset_delta, timestamp_delta, key, value, headers)
    return bytes(out), len(records)


def both_read(data, count, base_offset, base_timestamp, log_append_time, first_offset):
    args = (
        data,
        count,
        base_offset,
        base_timestamp,
        log_append_time,
        first_offset,
        ConsumerRecord,
        "topic",
        3,
        TimestampType.CREATE_TIME,
    )
    return _record_codec.read_records(*args), py_read_records(*args)


def assert_same(native, python) -> None:
    assert native == python
    if native is not None:
        assert all(type(record) is ConsumerRecord for record in native)
        assert [type(r.headers) for r in native] == [tuple] * len(native)


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=records_lists,
    base_offset=st.one_of(st.integers(0, 2**40), st.just(INT64_MAX - 2)),
    base_timestamp=st.one_of(st.integers(-1, 2**42), st.just(INT64_MAX - 1)),
    log_append_time=st.one_of(st.none(), st.integers(-1, 2**42)),
    first_offset=st.integers(0, 2**40),
)
def test_read_records_matches_the_twin_on_valid_sections(
    records, base_offset, base_timestamp, log_append_time, first_offset
) -> None:
    data, count = section_of(records)
    first_offset = min(
        INT64_MAX, base_offset + first_offset % (count + 2 + sum(r[4] for r in records))
    )
    native, python = both_read(data, count, base_offset, base_timestamp, log_append_time, 0)
    assert_same(native, python)
    assert native is not None and len(native) == count
    native, python = both_read(
        data, count, base_offset, base_timestamp, log_append_time, first_offset
    )
    assert_same(native, python)
    assert native == [record for record in python if record.offset >= first_offset]


@settings(max_examples=examples(600), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    records=records_lists,
    data=st.data(),
    count_change=st.integers(-2, 2),
)
def test_read_records_matches_the_twin_on_truncated_and_corrupt_sections(
    records, data, count_change
) -> None:
    section, count = section_of(records)
    section = bytearray(section)
    mutation = data.draw(st.sampled_from(["truncate", "flip", "extend", "insert", "none"]))
    if section and mutation == "truncate":
        del section[data.draw(st.integers(0, len(section) - 1)) :]
    elif section and mutation == "flip":
        for _ in range(data.draw(st.integers(1, 4))):
            at = data.draw(st.integers(0, len(section) - 1))
            section[at] = data.draw(st.integers(0, 255))
    elif mutation == "extend":
        section += data.draw(st.binary(min_size=1, max_size=12))
    elif mutation == "insert":
        at = data.draw(st.integers(0, len(section)))
        section[at:at] = data.draw(st.binary(min_size=1, max_size=6))
    count = max(0, count + count_change)
    native, python = both_read(bytes(section), count, 100, 1_000, None, 0)
    assert_same(native, python)


def test_read_records_refuses_bad_arguments() -> None:
    with pytest.raises(TypeError):
        _record_codec.read_records(b"", 0, 0, 0, None, 0, list, "t", 0, 0)
    with pytest.raises(ValueError):
        _record_codec.read_records(b"", -1, 0, 0, None, 0, ConsumerRecord, "t", 0, 0)
    assert _record_codec.read_records(b"", 0, 0, 0, None, 0, ConsumerRecord, "t", 0, 0) == []


def test_records_are_left_out_of_the_cyclic_collector_only_when_no_cycle_can_pass_them() -> None:
    """A consumer holds up to max_poll_records records: the collector need not traverse
    them when their items cannot refer back to them; given any other topic object it must."""
    import gc

    data, count = section_of([(0, b"k", b"v", [("h", b"x")], 0), (1, None, None, [], 1)])
    plain = _record_codec.read_records(
        data, count, 0, 0, None, 0, ConsumerRecord, "t", 0, TimestampType.CREATE_TIME
    )
    assert [gc.is_tracked(record) for record in plain] == [False, False]
    topic = ["t"]
    odd = _record_codec.read_records(
        data, count, 0, 0, None, 0, ConsumerRecord, topic, 0, TimestampType.CREATE_TIME
    )
    assert [gc.is_tracked(record) for record in odd] == [True, True]
    topic.append(odd)  # a cycle through the records, which the collector must still find
    del odd, topic
    assert gc.collect() > 0
