"""The append path's one-call validation in C (``_record_scan.validate_batches``) and its CRC-32C.

The Python validation is the oracle: on random valid and corrupted requests, under random
topic settings, the C call must accept exactly what the Python checks accept, and write the
same bytes and return the same figures; what the C call declines, it must leave untouched.
The CRC-32C must give the ``crc32c`` package's values, by the CPU instruction and by the
portable table loop alike.
"""

from __future__ import annotations

import contextlib
import os
import struct
from unittest import mock

import crc32c as crc32c_package
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from odradek.config.log_config import LogConfig
from odradek.errors import KafkaError
from odradek.int_limits import INT64_MAX
from odradek.record import _record_scan, record_framing
from odradek.record.compression import CompressionType
from odradek.record.record_batch import (
    BATCH_LENGTH_OFFSET,
    MAX_TIMESTAMP_OFFSET,
    RecordBatch,
    TimestampType,
    write_crc,
)
from odradek.record.record_batch_builder import build_batch
from odradek.storage import log_validator
from odradek.storage.log_validator import ValidationResult, validate_and_assign_offsets

NOW = 1_700_000_000_000


# --- CRC-32C -----------------------------------------------------------------------------------


def assert_every_implementation_gives(view: memoryview, start: int, expected: int) -> None:
    """The CRC the append path uses, and each implementation this CPU runs, plain and copying
    (and the copy is the data)."""
    assert _record_scan.crc32c(view, start) == expected
    results = _record_scan.crc32c_each(view, start)
    assert "portable" in results
    for name, result in results.items():
        if name.endswith(" copying"):
            assert result == (expected, bytes(view)), name
        else:
            assert result == expected, name


@settings(max_examples=examples(300), deadline=None)
@given(data=st.binary(max_size=3000), start=st.integers(0, 2**32 - 1), skip=st.integers(0, 7))
def test_crc32c_matches_the_package(data: bytes, start: int, skip: int) -> None:
    view = memoryview(data)[skip:]  # every alignment of the first byte
    assert_every_implementation_gives(view, start, crc32c_package.crc32c(view, start))


@pytest.mark.parametrize(
    "size",
    # around the three-stream blocks (3 x 256 and 3 x 8192 bytes), the folding passes (256
    # bytes at least, then 256 and 64 at a time) and batch sizes
    [0, 1, 7, 8, 63, 64, 255, 256, 257, 319, 320, 511, 512, 513, 767, 768, 769]
    + [3 * 768 + 5, 24575, 24576, 24577, 65536, 3 * 24576 + 777],
)
def test_crc32c_of_long_buffers_matches_the_package(size: int) -> None:
    data = os.urandom(size + 7)
    for skip in (0, 3, 7):
        view = memoryview(data)[skip : skip + size]
        for start in (0, 0xFFFFFFFF, 0x12345678):
            assert_every_implementation_gives(view, start, crc32c_package.crc32c(view, start))


def test_crc32c_runs_in_the_fastest_way_the_cpu_has() -> None:
    """Folding where the CPU has AVX-512 and VPCLMULQDQ, else the crc32 instruction."""
    flags = set()
    with contextlib.suppress(OSError), open("/proc/cpuinfo") as cpuinfo:
        flags = next((set(line.split()) for line in cpuinfo if line.startswith("flags")), set())
    results = _record_scan.crc32c_each(bytes(4096))
    assert ("sse4.2" in results) == ("sse4_2" in flags)
    folding_flags = {"sse4_2", "avx512f", "vpclmulqdq", "pclmulqdq"}
    assert ("folding" in results) == (folding_flags <= flags)


def test_crc32c_checks_its_arguments() -> None:
    with pytest.raises(OverflowError):
        _record_scan.crc32c(b"x", 2**32)
    with pytest.raises(TypeError):
        _record_scan.crc32c("text")


# --- validate_batches against the Python validation ------------------------------------------


def test_the_c_validation_is_built() -> None:
    """Without it every append runs the per-batch Python loop (docs/native.md)."""
    assert log_validator._native_validate is not None


def _python_only():  # noqa: ANN202
    """Every C shortcut off: the validation the C call must agree with."""
    patches = [
        mock.patch.object(log_validator, "_native_validate", None),
        mock.patch.object(log_validator, "_native_scan", None),
        mock.patch.object(record_framing, "_native_walk", None),
    ]
    for patch in patches:
        patch.start()
    return patches


def _python_outcome(request: bytes, **kwargs: object) -> ValidationResult | str:
    patches = _python_only()
    try:
        return validate_and_assign_offsets(request, **kwargs)
    except KafkaError as error:
        return type(error).__name__
    except struct.error:  # an offset or epoch past what the header holds
        return "struct.error"
    finally:
        for patch in patches:
            patch.stop()


def _c_outcome(request: bytes, config: LogConfig, **kwargs: object) -> tuple | None:
    """validate_batches' answer, checking that it never changes the request."""
    records = bytearray(request)
    validated = _record_scan.validate_batches(
        records,
        config.compact,
        config.max_message_bytes,
        kwargs["now_ms"],
        config.message_timestamp_before_max_ms,
        config.message_timestamp_after_max_ms,
        config.log_append_time,
        kwargs["next_offset"],
        kwargs["partition_leader_epoch"],
    )
    assert records == request, "the request was changed"
    if validated is None:
        return None
    copy, *summary = validated
    assert isinstance(copy, bytearray) and copy is not records
    return (bytes(copy), *summary)


@st.composite
def configs(draw: st.DrawFn) -> LogConfig:
    return LogConfig(
        cleanup_policy=draw(st.sampled_from([("delete",), ("compact",)])),
        max_message_bytes=draw(st.sampled_from([1_048_588, 400, 100])),
        message_timestamp_type=draw(st.sampled_from(["CreateTime", "LogAppendTime"])),
        message_timestamp_before_max_ms=draw(st.sampled_from([INT64_MAX, 10_000, 3, 0])),
        message_timestamp_after_max_ms=draw(st.sampled_from([INT64_MAX, 3_600_000, 2, 0])),
    )


@st.composite
def requests(draw: st.DrawFn) -> bytes:
    """One to four batches: keys or none, timestamps around now, sometimes compressed."""
    batches = []
    for _ in range(draw(st.integers(1, 4))):
        count = draw(st.integers(1, 12))
        key = draw(st.sampled_from([b"k", b"key" * 30, None]))
        start = NOW + draw(st.sampled_from([0, -5, -20_000, 3, 10**7, -(2**62)]))
        deltas = draw(st.lists(st.integers(-3, 3), min_size=count, max_size=count))
        records = [(start + delta, key, b"v%d" % i, ()) for i, delta in enumerate(deltas)]
        codec = draw(st.sampled_from([CompressionType.NONE] * 4 + [CompressionType.GZIP]))
        batch = bytearray(build_batch(records, compression=codec))
        if draw(st.integers(0, 4)) == 0:  # the producer's maxTimestamp or type is off
            batch[22] |= draw(st.sampled_from([0x00, 0x08]))
            struct.pack_into(">q", batch, MAX_TIMESTAMP_OFFSET, start + 1000)
            write_crc(batch, 0)
        batches.append(bytes(batch))
    return b"".join(batches)


def _corrupt(request: bytes, flips: list[tuple[int, int]], cut: int, fix_crcs: bool) -> bytes:
    """Flip bytes and cut the tail; with ``fix_crcs`` the flipped batches get a CRC matching
    their new bytes, so the checks past the CRC are reached."""
    data = bytearray(request)
    positions = []
    position = 0
    while position + 12 <= len(data):
        positions.append(position)
        position += struct.unpack_from(">i", data, position + BATCH_LENGTH_OFFSET)[0] + 12
    for at, mask in flips:
        data[at % len(data)] ^= mask
    if fix_crcs:
        for position in positions:
            length = struct.unpack_from(">i", data, position + BATCH_LENGTH_OFFSET)[0]
            if 61 <= length + 12 <= len(data) - position:
                write_crc(data, position)
    if cut:
        del data[-cut:]
    return bytes(data)


def _assert_agree(
    request: bytes, config: LogConfig, now_ms: int, next_offset: int, epoch: int
) -> None:
    kwargs = {"now_ms": now_ms, "next_offset": next_offset, "partition_leader_epoch": epoch}
    expected = _python_outcome(request, config=config, **kwargs)
    outcome = _c_outcome(request, config, **kwargs)
    if outcome is None:  # declined: rejected, or left to Python (compressed, out of range)
        compressed = any(batch_codecs(request))
        assert isinstance(expected, str) or compressed or expected.last_offset > INT64_MAX
        return
    assert not isinstance(expected, str), f"C accepted what Python rejects: {expected}"
    assert outcome == (bytes(expected.records), *expected[1:])
    assert validate_and_assign_offsets(request, config=config, **kwargs) == expected


def batch_codecs(request: bytes) -> list[int]:
    """The codec id of each batch whose header can be read."""
    codecs, position = [], 0
    while position + 61 <= len(request):
        codecs.append(request[position + 22] & 0x07)
        position += max(61, struct.unpack_from(">i", request, position + 8)[0] + 12)
    return codecs


@settings(max_examples=examples(600), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    request=requests(),
    config=configs(),
    flips=st.lists(st.tuples(st.integers(0, 10**6), st.integers(1, 255)), max_size=2),
    fix_crcs=st.booleans(),
    cut=st.sampled_from([0, 0, 0, 0, 1, 7, 61]),
    next_offset=st.sampled_from([0, 17, 2**40, INT64_MAX - 5]),
    epoch=st.sampled_from([0, 3, -1, 2**31]),
)
def test_the_c_validation_agrees_with_python(
    request: bytes,
    config: LogConfig,
    flips: list[tuple[int, int]],
    fix_crcs: bool,
    cut: int,
    next_offset: int,
    epoch: int,
) -> None:
    request = _corrupt(request, flips, cut, fix_crcs)
    _assert_agree(request, config, NOW, next_offset, epoch)


@settings(max_examples=examples(200), deadline=None)
@given(request=requests(), config=configs(), next_offset=st.integers(0, 2**40))
def test_the_c_validation_takes_every_valid_uncompressed_request(
    request: bytes, config: LogConfig, next_offset: int
) -> None:
    """On requests Python accepts, C declines only compressed ones: the fast path is taken."""
    kwargs = {"now_ms": NOW, "next_offset": next_offset, "partition_leader_epoch": 2}
    expected = _python_outcome(request, config=config, **kwargs)
    if isinstance(expected, str) or any(batch_codecs(request)):
        return
    assert _c_outcome(request, config, **kwargs) == (bytes(expected.records), *expected[1:])


def test_log_append_time_is_stamped_with_a_new_crc() -> None:
    config = LogConfig(message_timestamp_type="LogAppendTime")
    request = build_batch([(NOW - 5, b"k", b"v", ()), (NOW - 9, b"k", b"w", ())])
    result = validate_and_assign_offsets(request, next_offset=4, config=config, now_ms=NOW + 1)
    assert (result.max_timestamp, result.offset_of_max_timestamp) == (NOW + 1, 4)
    _assert_agree(request, config, NOW + 1, 4, 0)
    batch = RecordBatch(result.records)
    assert batch.is_valid() and batch.timestamp_type is TimestampType.LOG_APPEND_TIME


def test_many_small_batches_take_the_c_path() -> None:
    """More batches than the call's fixed room (16): it makes room for them all."""
    request = b"".join(build_batch([(NOW, b"k", b"v%d" % i, ())]) for i in range(40))
    outcome = _c_outcome(
        request, LogConfig(), now_ms=NOW, next_offset=100, partition_leader_epoch=1
    )
    assert outcome is not None and outcome[2] == 139 and outcome[6] == 40
    _assert_agree(request, LogConfig(), NOW, 100, 1)


def test_a_limit_past_int64_is_left_to_python() -> None:
    request = bytearray(build_batch([(NOW, b"k", b"v", ())]))
    original = bytes(request)
    declined = _record_scan.validate_batches(request, False, 2**63, NOW, 0, 0, False, 0, 0)
    assert declined is None and request == original


def test_offsets_past_int64_are_left_to_python() -> None:
    request = build_batch([(NOW, b"k", b"v", ())] * 3)
    assert (
        _c_outcome(
            request, LogConfig(), now_ms=NOW, next_offset=INT64_MAX - 1, partition_leader_epoch=0
        )
        is None
    )


def test_batches_ending_at_the_last_int64_offset_agree() -> None:
    """The last offset a log can hold, reached by the last of several batches: nothing is
    computed past it (UBSan fails `make sanitize` on an overflow there)."""
    request = b"".join(build_batch([(NOW, b"k", b"v%d" % i, ())] * 2) for i in range(3))
    outcome = _c_outcome(
        request, LogConfig(), now_ms=NOW, next_offset=INT64_MAX - 5, partition_leader_epoch=0
    )
    assert outcome is not None and outcome[2] == INT64_MAX
    _assert_agree(request, LogConfig(), NOW, INT64_MAX - 5, 0)


def test_validate_batches_takes_any_buffer_and_checks_its_arguments() -> None:
    request = build_batch([(NOW, b"k", b"v", ())])
    for buffer in (request, bytearray(request), memoryview(request)):
        validated = _record_scan.validate_batches(buffer, False, 1000, NOW, 0, 0, False, 7, 0)
        assert validated is not None and validated[1:3] == (7, 7)
    with pytest.raises(TypeError):
        _record_scan.validate_batches("text", False, 1, NOW, 0, 0, False, 0, 0)
    with pytest.raises(TypeError):
        _record_scan.validate_batches(bytearray(), False, "1", NOW, 0, 0, False, 0, 0)


def test_without_the_c_module_the_python_validation_does_the_work() -> None:
    request = build_batch([(NOW, b"k", b"v", ())] * 3) + build_batch([(NOW + 1, b"k", b"w", ())])
    expected = validate_and_assign_offsets(request, next_offset=9, config=LogConfig(), now_ms=NOW)
    assert _python_outcome(request, next_offset=9, config=LogConfig(), now_ms=NOW) == expected


@pytest.mark.parametrize("value_size", [1, 700, 9_000, 30_000, 90_000])
@pytest.mark.parametrize("misalignment", range(8))
def test_the_copy_checked_in_one_pass_is_exact_at_any_size_and_alignment(
    value_size: int, misalignment: int
) -> None:
    """The CRC is checked as the request is copied, in 8-byte words from an aligned address and
    in three streams for long stretches: every size and source alignment must copy every byte
    and still catch a flipped one anywhere, first or last byte included."""
    request = build_batch([(NOW, b"k", os.urandom(value_size), ()), (NOW, b"l", b"v", ())])
    padded = bytearray(misalignment) + bytearray(request)
    view = memoryview(padded)[misalignment:]
    validated = _record_scan.validate_batches(view, False, 2**31, NOW, 0, 0, False, 5, 3)
    assert validated is not None
    expected = validate_and_assign_offsets(
        request, next_offset=5, config=LogConfig(), now_ms=NOW, partition_leader_epoch=3
    )
    assert ValidationResult._make(validated) == expected
    for flipped in (21, 22, len(request) // 2, len(request) - 1):
        corrupt = bytearray(padded)
        corrupt[misalignment + flipped] ^= 0x01
        view = memoryview(corrupt)[misalignment:]
        assert _record_scan.validate_batches(view, False, 2**31, NOW, 0, 0, False, 5, 3) is None
