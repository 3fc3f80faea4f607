"""What validating a produce request costs, per codec and record size; and the record codec.

For each case a request of one producer batch is validated (validate_and_assign_offsets: CRC,
decompression, the per-record framing walk, offset assignment) over and over. Figures are
batches/s and MB/s of request bytes, and ratios to two bare passes over the same bytes: a
CRC-32C (the least any validation must do) and an os.write to a file in the page cache (the
cost of storing it). "decompress" is the time the codec alone takes per batch.

A second table gives the record codec's cost per record, uncompressed: building a batch as a
producer does (RecordBatchBuilder.append_with_offset per record, then build), validating it,
and reading it back (RecordBatch.records()).

Run: .venv/bin/python bench/record_validation.py [--seconds 0.5]
"""

from __future__ import annotations

import argparse
import os
import random
import tempfile
import time
from collections.abc import Callable

import crc32c

from odradek.config.log_config import LogConfig
from odradek.record.compression import CompressionType
from odradek.record.record_batch import RECORDS_OFFSET, RecordBatch
from odradek.record.record_batch_builder import RecordBatchBuilder, RecordTuple, build_batch
from odradek.storage.log_validator import validate_and_assign_offsets

CASES = [  # (record size, batch size, fixed record size?)
    (100, 16 * 1024, True),
    (1000, 64 * 1024, True),
    (100, 16 * 1024, False),
    (1000, 64 * 1024, False),
]
CONFIG = LogConfig()


def payload(size: int, rng: random.Random) -> bytes:
    """JSON-ish text: compressible the way real payloads are, not a run of one byte."""
    tag = rng.choice(["red", "green", "blue"])
    note = "".join(rng.choice("abcdefghij klmnop") for _ in range(size))
    text = f'{{"id":{rng.randrange(10**9)},"user":"u{rng.randrange(10**5):05d}",'
    text += f'"tags":["{tag}"],"note":"{note}"}}'
    return text.encode()[:size].ljust(size, b" ")


def producer_records(record_size: int, batch_size: int, fixed: bool) -> list[RecordTuple]:
    """One producer batch's worth of (timestamp, key, value, headers), keys all present."""
    rng = random.Random(record_size)
    now = int(time.time() * 1000)
    records: list[RecordTuple] = []
    size = RECORDS_OFFSET
    while True:
        value_size = record_size if fixed else rng.randint(record_size // 2, record_size * 3 // 2)
        key = b"key-%06d" % len(records)
        size += value_size + len(key) + 8
        if size > batch_size:
            return records
        records.append((now + len(records) // 50, key, payload(value_size, rng), ()))


def build_as_a_producer(records: list[RecordTuple]) -> bytes:
    """A batch built record by record, as the client's ProducerBatch builds one."""
    builder = RecordBatchBuilder()
    append = builder.append_with_offset
    for offset, (timestamp, key, value, headers) in enumerate(records):
        append(offset, timestamp, key, value, headers)
    return builder.build()


def rate(action: Callable[[], object], seconds: float) -> float:
    """Calls per second of ``action``, measured for about ``seconds``.

    Seconds of this process's CPU time (user and system), so that other work on a shared
    machine, which takes the CPU away from it, does not count against it.
    """
    calls, started = 0, time.process_time()
    while (elapsed := time.process_time() - started) < seconds:
        for _ in range(20):
            action()
        calls += 20
    return calls / elapsed


def write_rate(data: bytes, seconds: float) -> float:
    """os.write calls per second into a page-cached file, rewinding every 64 MiB."""
    with tempfile.TemporaryFile() as file:
        fd = file.fileno()
        limit = 64 * 1024 * 1024 // len(data)
        written = 0

        def write() -> None:
            nonlocal written
            os.write(fd, data)
            written += 1
            if written >= limit:
                os.lseek(fd, 0, os.SEEK_SET)
                written = 0

        return rate(write, seconds)


def case_name(record_size: int, fixed: bool) -> str:
    return f"{record_size} B {'fixed' if fixed else 'varied'}"


def validation_table(seconds: float) -> None:
    print(
        f"{'records':>16} {'codec':>6} {'batch B':>8} {'n':>4} {'batches/s':>10} {'MB/s':>8} "
        f"{'x crc32c':>8} {'x write':>8} {'decompress us':>13}"
    )
    for record_size, batch_size, fixed in CASES:
        name = case_name(record_size, fixed)
        records = producer_records(record_size, batch_size, fixed)
        for codec in CompressionType:
            data = build_batch(records, compression=codec)
            validated = validate_and_assign_offsets(
                data, next_offset=0, config=CONFIG, now_ms=int(time.time() * 1000)
            )
            now = int(time.time() * 1000)
            batches = rate(
                lambda data=data, now=now: validate_and_assign_offsets(
                    data, next_offset=0, config=CONFIG, now_ms=now
                ),
                seconds,
            )
            crc = rate(lambda data=data: crc32c.crc32c(data), seconds)
            write = write_rate(data, seconds)
            block = data[RECORDS_OFFSET:]
            decompress = 1e6 / rate(lambda c=codec, b=block: c.decompress(b), seconds / 2)
            print(
                f"{name:>16} {codec.label:>6} {len(data):>8} {validated.record_count:>4} "
                f"{batches:>10.0f} {batches * len(data) / 1e6:>8.1f} {batches / crc:>8.3f} "
                f"{batches / write:>8.3f} {decompress:>13.1f}"
            )


def codec_table(seconds: float) -> None:
    print(f"\n{'records':>16} {'n':>4} {'build':>10} {'validate':>10} {'decode':>10}  (us/record)")
    for record_size, batch_size, fixed in CASES:
        records = producer_records(record_size, batch_size, fixed)
        data = build_as_a_producer(records)
        now = int(time.time() * 1000)
        built = rate(lambda records=records: build_as_a_producer(records), seconds)
        validated = rate(
            lambda data=data, now=now: validate_and_assign_offsets(
                data, next_offset=0, config=CONFIG, now_ms=now
            ),
            seconds,
        )
        decoded = rate(lambda data=data: list(RecordBatch(data).records()), seconds)
        per_record = [1e6 / (batches * len(records)) for batches in (built, validated, decoded)]
        print(
            f"{case_name(record_size, fixed):>16} {len(records):>4} "
            + " ".join(f"{cost:>10.2f}" for cost in per_record)
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seconds", type=float, default=0.5, help="time per measurement")
    seconds = parser.parse_args().seconds
    validation_table(seconds)
    codec_table(seconds)


if __name__ == "__main__":
    main()
