"""Writeback benchmark: prints figures, asserts nothing.

How much a process writing and fsyncing large files (as the cleaner's worker does, at nice 19)
delays its neighbours' wake-ups: the p50/p99 round trip of a socket ping-pong between two
processes, alone and beside a writer of 50 MB files in each way, all in one run:
- ``4 MB writes``: 4 MB write calls, then one fsync of the file (the cleaner before
  ``storage/writeback.py``: a run of kept batches went in one call);
- ``256 KB writes``: ``FileRecords.append`` of the same data (at most ``MAX_WRITE_BYTES`` a
  call), then one fsync;
- ``write-through``: the same with ``write_through=True``, as the cleaner writes now.
Each writer line also gives the writer's own MB/s.

Usage: python bench/writeback.py [--dir DIR] [--seconds S]
"""

from __future__ import annotations

import argparse
import multiprocessing
import os
import socket
import statistics
import tempfile
import time
from pathlib import Path

from odradek.storage.file_records import FileRecords

MB = 1024 * 1024
FILE_BYTES = 50 * MB
CHUNK_BYTES = 4 * MB
WRITERS = ("4 MB writes", "256 KB writes", "write-through")


def write_files(directory: Path, mode: str, rates: multiprocessing.SimpleQueue) -> None:
    """The neighbour: write, fsync and delete 50 MB files until killed; report its MB/s."""
    os.nice(19)
    chunk = os.urandom(CHUNK_BYTES)
    path = directory / "neighbour.log"
    while True:
        start = time.perf_counter()
        records = FileRecords.open(path)
        for _ in range(FILE_BYTES // CHUNK_BYTES):
            if mode == "4 MB writes":
                os.write(records.fd, chunk)  # the whole chunk in one call
            else:
                records.append(chunk, write_through=mode == "write-through")
        records.flush()
        records.close_handler()
        path.unlink()
        rates.put(FILE_BYTES / MB / (time.perf_counter() - start))


def echo(sock: socket.socket) -> None:
    while message := sock.recv(64):
        sock.send(message)


def ping_pong(sock: socket.socket, seconds: float) -> list[float]:
    """Round trips, with 0.2 ms of work between them, as a client does between requests."""
    round_trips = []
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        start = time.perf_counter()
        sock.send(b"x" * 16)
        sock.recv(64)
        round_trips.append(time.perf_counter() - start)
        busy_until = time.perf_counter() + 0.0002
        while time.perf_counter() < busy_until:
            pass
    return round_trips


def measure(directory: Path, mode: str | None, seconds: float) -> str:
    context = multiprocessing.get_context("spawn")
    rates = context.SimpleQueue()
    writer = mode and context.Process(target=write_files, args=(directory, mode, rates))
    client, server = socket.socketpair()
    echoer = context.Process(target=echo, args=(server,))
    echoer.start()
    if writer:
        writer.start()
        time.sleep(0.5)
    round_trips = ping_pong(client, seconds)
    if writer:
        writer.kill()
        writer.join()
    client.close()
    echoer.join()
    quantiles = statistics.quantiles(round_trips, n=100)
    line = f"  p50 {quantiles[49] * 1e3:6.3f} ms   p99 {quantiles[98] * 1e3:6.3f} ms"
    if writer:
        written = []
        while not rates.empty():
            written.append(rates.get())
        line += f"   writer {statistics.median(written):5.0f} MB/s" if written else ""
    return line


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dir", type=Path, default=None, help="where to write (default: tmp)")
    parser.add_argument("--seconds", type=float, default=4.0, help="each ping-pong")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="writeback-bench-", dir=args.dir) as directory:
        print("socket ping-pong round trip beside a nice-19 writer of 50 MB files")
        for mode in (None, *WRITERS):
            print(f"{mode or 'alone':15s}{measure(Path(directory), mode, args.seconds)}")


if __name__ == "__main__":
    main()
