"""Where a record's end-to-end time goes inside odradek's own clients, for bench/e2e.py.

While active, every request a client Connection writes and every response frame it reads is
timestamped (``time.perf_counter``, the clock the bench stamps records with), with the
request or frame kept. Afterwards the Produce requests and Fetch responses are decoded: each
record's value is the time it was sent, so each record's time splits into

- ``send->written``: from ``send`` until its Produce request was written to the socket (the
  sender's scheduling, linger, in-flight limits);
- ``written->acked``: Produce written until its response was read (the broker, fdatasync
  for acks=all, the wire, the client's loop getting round to the read);
- ``acked->fetched``: the Produce response read until the Fetch response holding the record
  was read (long-poll wake-up at the broker; a fetch not yet re-issued when the record
  arrived);
- ``fetched->delivered``: the Fetch response read until ``poll`` handed the record to the
  application (decoding, the consumer task's scheduling);

and the fetch re-issue gap (a Fetch response read until the next Fetch was written on that
connection). It measures the clients; it costs a few microseconds a request and keeps the
frames' bytes until the run ends.
"""

from __future__ import annotations

import array
import bisect
import functools
import statistics
import threading
import time
from typing import Any

import msgpack

from odradek.client.connection import Connection
from odradek.protocol.api_keys import ApiKey
from odradek.protocol.frame import Frame
from odradek.protocol.header import ResponseHeader
from odradek.protocol.messages import decode_response
from odradek.record.memory_records import MemoryRecords

SEGMENTS = ("send->written", "written->acked", "acked->fetched", "fetched->delivered")


def _sent_times(records: bytes | memoryview) -> list[float]:
    """The send times the bench wrote into the records' values."""
    return [
        float(record.value)
        for batch in MemoryRecords(bytes(records)).batches()
        for record in batch.records()
    ]


class ClientTrace:
    """Timestamps every client request written and response read while in a ``with``.

    Kept in arrays and lists of bytes, which the garbage collector does not track, so the
    trace adds no collections of its own to the run it measures.
    """

    def __init__(self) -> None:
        # per request written: connection id, api key, correlation id; when; Produce records
        self.write_ids = array.array("q")
        self.write_times = array.array("d")
        self.write_records: list[bytes] = []
        # per response read: connection id, correlation id; when; a Fetch's header and payload
        self.read_ids = array.array("q")
        self.read_times = array.array("d")
        self.read_headers: list[bytes] = []
        self.read_payloads: list[bytes] = []
        # thread hand-offs: a sync send's wake-up of the sender scheduled (caller thread) and
        # run (loop thread); a poller's wake-up set (loop thread) and its wait returning
        self.wake_scheduled = array.array("d")
        self.wake_run = array.array("d")
        self.poller_woken = array.array("d")
        self.poller_returned = array.array("d")
        self._originals: dict[str, Any] = {}

    def __enter__(self) -> ClientTrace:
        original_write = Connection._write
        original_dispatch = Connection._dispatch
        self._originals = {"_write": original_write, "_dispatch": original_dispatch}

        @functools.wraps(original_write)
        def traced_write(connection: Connection, request: Any, api_key: ApiKey) -> int:
            correlation_id = original_write(connection, request, api_key)
            self.write_times.append(time.perf_counter())
            self.write_ids.extend((id(connection), api_key, correlation_id))
            records = b""
            if api_key == ApiKey.PRODUCE:
                records = b"".join(bytes(data.records) for data in request.partitions)
            self.write_records.append(records)
            return correlation_id

        @functools.wraps(original_dispatch)
        def traced_dispatch(connection: Connection, frame: Frame) -> None:
            self.read_times.append(time.perf_counter())
            correlation_id = ResponseHeader.from_header(frame.header).correlation_id
            self.read_ids.extend((id(connection), correlation_id))
            pending = connection._pending.get(correlation_id)
            if pending is not None and pending[1] == ApiKey.FETCH:
                self.read_headers.append(msgpack.packb(frame.header))
                self.read_payloads.append(bytes(frame.payload))
            else:
                self.read_headers.append(b"")
                self.read_payloads.append(b"")
            original_dispatch(connection, frame)

        Connection._write = traced_write
        Connection._dispatch = traced_dispatch
        self._trace_hand_offs()
        return self

    def _trace_hand_offs(self) -> None:
        """Timestamp the two hand-offs between a sync client's caller threads and its loop."""
        from odradek.client.fetcher import Fetcher
        from odradek.client.producer import AsyncProducer

        original_wake = AsyncProducer._wake_sender
        original_wake_on_loop = AsyncProducer._wake_sender_on_loop
        original_set = Fetcher._wake_pollers
        original_wait = Fetcher.wait_for_data_threadsafe
        self._originals.update(
            {
                "AsyncProducer._wake_sender": original_wake,
                "AsyncProducer._wake_sender_on_loop": original_wake_on_loop,
                "Fetcher._wake_pollers": original_set,
                "Fetcher.wait_for_data_threadsafe": original_wait,
            }
        )

        def traced_wake(producer: AsyncProducer) -> None:
            if not producer._wakeup_scheduled and threading.get_ident() != producer._loop_thread:
                self.wake_scheduled.append(time.perf_counter())
            original_wake(producer)

        def traced_wake_on_loop(producer: AsyncProducer) -> None:
            self.wake_run.append(time.perf_counter())
            original_wake_on_loop(producer)

        def traced_set(fetcher: Fetcher) -> None:
            self.poller_woken.append(time.perf_counter())
            original_set(fetcher)

        def traced_wait(fetcher: Fetcher, timeout_s: float) -> None:
            original_wait(fetcher, timeout_s)
            self.poller_returned.append(time.perf_counter())

        AsyncProducer._wake_sender = traced_wake
        AsyncProducer._wake_sender_on_loop = traced_wake_on_loop
        Fetcher._wake_pollers = traced_set
        Fetcher.wait_for_data_threadsafe = traced_wait

    def __exit__(self, *exc: object) -> None:
        from odradek.client.fetcher import Fetcher
        from odradek.client.producer import AsyncProducer

        owners = {"AsyncProducer": AsyncProducer, "Fetcher": Fetcher}
        for name, original in self._originals.items():
            owner, _, attribute = name.rpartition(".")
            setattr(owners.get(owner, Connection), attribute, original)

    def breakdown(self, received: list[tuple[float, float]]) -> dict[str, list[float]]:
        """Per record (keyed by its send time), each segment in ms; plus the fetch gaps."""
        read_at = {
            (self.read_ids[2 * i], self.read_ids[2 * i + 1]): i for i in range(len(self.read_times))
        }
        written: dict[float, float] = {}
        acked: dict[float, float] = {}
        fetched: dict[float, float] = {}
        gaps: list[float] = []
        last_fetch_read: dict[int, float] = {}
        for i, at in enumerate(self.write_times):
            conn, api_key, cid = self.write_ids[3 * i : 3 * i + 3]
            response = read_at.get((conn, cid))
            if api_key == ApiKey.PRODUCE:
                for sent in _sent_times(self.write_records[i]):
                    written[sent] = at
                    if response is not None:
                        acked[sent] = self.read_times[response]
            elif api_key == ApiKey.FETCH:
                if conn in last_fetch_read:
                    gaps.append((at - last_fetch_read[conn]) * 1000)
                if response is None:
                    continue
                last_fetch_read[conn] = self.read_times[response]
                frame = Frame(
                    msgpack.unpackb(self.read_headers[response]),
                    memoryview(self.read_payloads[response]),
                )
                for partition in decode_response(ApiKey.FETCH, frame).partitions:
                    for sent in _sent_times(partition.records):
                        fetched.setdefault(sent, self.read_times[response])
        segments: dict[str, list[float]] = {name: [] for name in SEGMENTS}
        segments["total"] = []
        for sent, latency in received:
            if sent not in written or sent not in acked or sent not in fetched:
                continue
            delivered = sent + latency
            points = (sent, written[sent], acked[sent], fetched[sent], delivered)
            for name, start, end in zip(SEGMENTS, points, points[1:], strict=False):
                segments[name].append((end - start) * 1000)
            segments["total"].append(latency * 1000)
        segments["fetch re-issue gap"] = gaps
        segments["sender wake-up hand-off"] = [
            (run - scheduled) * 1000
            for scheduled, run in zip(self.wake_scheduled, self.wake_run, strict=False)
        ]
        woken = list(self.poller_woken)
        poller = []
        previous = 0.0
        for returned in self.poller_returned:
            last = bisect.bisect_right(woken, returned) - 1
            if last >= 0 and woken[last] > previous:  # woken, not timed out
                poller.append((returned - woken[last]) * 1000)
            previous = returned
        segments["poller wake-up hand-off"] = poller
        return segments


def summary(segments: dict[str, list[float]]) -> list[str]:
    """One line per segment: p50/p99/p99.9/max, and its median among the slowest 1% of
    records (which segment the tail is made of)."""
    total = segments["total"]
    if not total:
        return ["    trace: no record seen end to end"]
    slow_cut = sorted(total)[int(len(total) * 0.99)]
    slow = [i for i, latency in enumerate(total) if latency >= slow_cut]
    lines = []
    for name, values in segments.items():
        if not values:
            continue
        ordered = sorted(values)

        def at(fraction: float, ordered: list[float] = ordered) -> float:
            return ordered[min(len(ordered) - 1, int(len(ordered) * fraction))]

        line = (
            f"    trace {name:>18}: p50 {at(0.5):.3f}, p99 {at(0.99):.3f}, "
            f"p99.9 {at(0.999):.3f}, max {ordered[-1]:.3f} ms"
        )
        if name in SEGMENTS or name == "total":
            line += f"; in the slowest 1%: median {statistics.median(values[i] for i in slow):.3f}"
        lines.append(line)
    slowest = sorted(range(len(total)), key=total.__getitem__)[-max(1, len(total) // 1000) :]
    largest = {name: 0 for name in SEGMENTS}
    for i in slowest:
        largest[max(SEGMENTS, key=lambda name: segments[name][i])] += 1
    lines.append(
        f"    trace the slowest 0.1% ({len(slowest)} records, from {total[slowest[0]]:.3f} ms): "
        + ", ".join(
            f"{name} median {statistics.median(segments[name][i] for i in slowest):.3f} "
            f"(largest in {largest[name]})"
            for name in SEGMENTS
        )
    )
    return lines
