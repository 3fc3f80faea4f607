"""FileRecords.checked_batch_headers: recovery's scan, a chunk at a time.

Each test lays batches out on disk so that chunk edges, oversized batches, torn and impossible
tails fall where the chunked read must get them right; each runs with the chunk check
in C and with its Python fallback, and the two must agree on any bytes.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from odradek.record import _record_scan
from odradek.record.record_batch import LOG_OVERHEAD, RecordBatch
from odradek.record.record_batch_builder import build_batch
from odradek.storage import file_records
from odradek.storage.file_records import FileRecords


def batch_at(base_offset: int, value_size: int) -> bytes:
    return build_batch([(1000, b"k", os.urandom(value_size), ())], base_offset=base_offset)


def write(path: Path, batches: list[bytes], tail: bytes = b"") -> list[int]:
    """Write the batches (and ``tail``); return where each starts."""
    positions, position = [], 0
    for data in batches:
        positions.append(position)
        position += len(data)
    path.write_bytes(b"".join(batches) + tail)
    return positions


def scan(path: Path, start: int = 0) -> list[tuple[int, int, bool]]:
    records = FileRecords.open(path, file_already_exists=True)
    try:
        return [
            (position, header.base_offset, crc_ok)
            for position, header, crc_ok in records.checked_batch_headers(start)
        ]
    finally:
        records.close_handler()


@pytest.fixture(autouse=True)
def small_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """Chunks of 4 KiB, so a few small batches cross several chunk edges."""
    monkeypatch.setattr(file_records, "_SCAN_CHUNK_BYTES", 4096)


@pytest.fixture(autouse=True, params=["C", "Python"])
def chunk_check(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every test with the C chunk check and with the Python fallback."""
    if request.param == "Python":
        monkeypatch.setattr(file_records, "_whole_batches", file_records._python_whole_batches)
        monkeypatch.setattr(file_records, "_crc_matches", file_records._python_crc_matches)
    else:
        assert file_records._whole_batches is _record_scan.whole_batches
        assert file_records._crc_matches is _record_scan.crc_matches


@settings(max_examples=examples(300), deadline=None)
@given(
    sizes=st.lists(st.integers(0, 300), max_size=6),
    cut=st.integers(0, 2000),
    flips=st.lists(st.integers(0, 2000), max_size=3),
)
def test_the_c_chunk_checks_agree_with_python(sizes: list[int], cut: int, flips: list[int]) -> None:
    """Valid batches, then a random cut and flipped bytes (CRCs, lengths, anything)."""
    data = bytearray(b"".join(batch_at(index, size) for index, size in enumerate(sizes)))
    for flip in flips:
        if flip < len(data):
            data[flip] ^= 0x40
    length = min(cut, len(data))
    buffer = data + bytearray(64)  # bytes past ``length`` must not count
    walked = _record_scan.whole_batches(buffer, length)
    assert walked == file_records._python_whole_batches(buffer, length)
    batches = walked[0]
    assert _record_scan.crc_matches(buffer, batches) == file_records._python_crc_matches(
        buffer, batches
    )


def test_the_c_chunk_checks_refuse_what_is_outside_their_buffer() -> None:
    with pytest.raises(ValueError, match="length outside the buffer"):
        _record_scan.whole_batches(bytearray(10), 11)
    with pytest.raises(ValueError, match="length outside the buffer"):
        _record_scan.whole_batches(bytearray(10), -1)
    with pytest.raises(ValueError, match="a batch outside the buffer"):
        _record_scan.crc_matches(bytearray(100), [(50, 61)])
    with pytest.raises(TypeError):
        _record_scan.crc_matches(bytearray(100), [(0,)])


def test_every_batch_across_chunk_edges(tmp_path: Path) -> None:
    batches = [batch_at(n, 100 + 37 * n) for n in range(60)]
    positions = write(tmp_path / "a.log", batches)
    assert scan(tmp_path / "a.log") == [(p, n, True) for n, p in enumerate(positions)]
    assert scan(tmp_path / "a.log", positions[7]) == [
        (p, n, True) for n, p in enumerate(positions) if n >= 7
    ]


def test_batches_larger_than_a_chunk(tmp_path: Path) -> None:
    batches = [batch_at(0, 100), batch_at(1, 10_000), batch_at(2, 50), batch_at(3, 9_000)]
    positions = write(tmp_path / "a.log", batches)
    assert scan(tmp_path / "a.log") == [(p, n, True) for n, p in enumerate(positions)]


def test_a_corrupt_crc_is_reported_and_the_scan_goes_on(tmp_path: Path) -> None:
    batches = [batch_at(n, 500) for n in range(20)]
    positions = write(tmp_path / "a.log", batches)
    with open(tmp_path / "a.log", "r+b") as file:
        file.seek(positions[11] + 100)
        flipped = file.read(1)[0] ^ 0xFF  # a changed byte whatever the random value was
        file.seek(positions[11] + 100)
        file.write(bytes([flipped]))
    assert [crc_ok for _, _, crc_ok in scan(tmp_path / "a.log")] == [n != 11 for n in range(20)]


@pytest.mark.parametrize("torn", [1, 30, 61, 400])
def test_a_torn_last_batch_ends_the_scan(tmp_path: Path, torn: int) -> None:
    batches = [batch_at(n, 700) for n in range(12)]
    whole = write(tmp_path / "a.log", batches[:-1], tail=batches[-1][:torn])
    assert scan(tmp_path / "a.log") == [(p, n, True) for n, p in enumerate(whole)]


@pytest.mark.parametrize("length", [-1, 0, 48, 2**31 - 1])
def test_an_impossible_or_overlong_length_ends_the_scan(tmp_path: Path, length: int) -> None:
    batches = [batch_at(n, 900) for n in range(9)]
    bad = bytearray(batch_at(9, 900))
    struct.pack_into(">i", bad, 8, length)
    positions = write(tmp_path / "a.log", batches, tail=bytes(bad) + batch_at(10, 10))
    assert scan(tmp_path / "a.log") == [(p, n, True) for n, p in enumerate(positions)]


def test_a_scan_left_early_leaves_the_file_to_close(tmp_path: Path) -> None:
    write(tmp_path / "a.log", [batch_at(n, 800) for n in range(40)])
    records = FileRecords.open(tmp_path / "a.log", file_already_exists=True)
    scanner = records.checked_batch_headers()
    next(scanner)
    scanner.close()
    records.close_handler()


def test_an_empty_or_tiny_file(tmp_path: Path) -> None:
    (tmp_path / "a.log").write_bytes(b"")
    assert scan(tmp_path / "a.log") == []
    (tmp_path / "b.log").write_bytes(b"\x00" * 30)
    assert scan(tmp_path / "b.log") == []
    one = batch_at(0, 10)
    assert RecordBatch(one).size_in_bytes == len(one) > LOG_OVERHEAD
    (tmp_path / "c.log").write_bytes(one)
    assert scan(tmp_path / "c.log") == [(0, 0, True)]

