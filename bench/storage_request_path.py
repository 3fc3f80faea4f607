"""Thread CPU time of the storage calls one small request makes: prints figures, asserts nothing.

Per produce of one single-record batch at acks=1 the broker calls ``LogManager.get_log``,
``UnifiedLog.append`` committing (older versions: ``append``, ``log_end_offset_metadata`` and
``maybe_increment_high_watermark``); per fetch that finds nothing new, ``get_log``,
``UnifiedLog.log_end_offset`` and ``UnifiedLog.read`` at
the high watermark; a consumer keeping up then reads each append from the high watermark it
last saw. The idempotent produce is the same append of a batch with a producer id,
each at the producer's next sequence (what a Kafka client sends by default,
enable.idempotence=true), all built before timing. This times each call alone (thread CPU,
best of ``--rounds``), so two versions of the storage layer can be compared call by call. Run
it from each checkout in turn, interleaved, one process per version and round:

    for round in 1 2 3; do
        for tree in /path/to/old /path/to/new; do
            PYTHONPATH=$tree .venv/bin/python bench/storage_request_path.py --label $tree
        done
    done

Usage: python bench/storage_request_path.py [--calls N] [--rounds N] [--label TEXT]
"""

from __future__ import annotations

import argparse
import inspect
import shutil
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import odradek
from odradek.clock import SYSTEM_CLOCK
from odradek.config.broker_config import BrokerConfig
from odradek.record.record_batch_builder import build_batch
from odradek.server.admin.topic_admin import TopicAdmin
from odradek.storage.fetch_data_info import FetchIsolation
from odradek.storage.log_manager import LogManager
from odradek.storage.unified_log import UnifiedLog
from odradek.topic_partition import TopicPartition

MB = 1024 * 1024


def per_call_microseconds(call: Callable[[], object], calls: int, rounds: int) -> float:
    """The least thread CPU time per ``call()`` over ``rounds`` rounds of ``calls`` calls."""
    best = float("inf")
    for _ in range(rounds):
        start = time.thread_time_ns()
        for _ in range(calls):
            call()
        best = min(best, (time.thread_time_ns() - start) / calls / 1000)
    return best


def per_batch_microseconds(
    append: Callable[[bytes], object], batches: list[bytes], rounds: int
) -> float:
    """The least thread CPU time per ``append(batch)`` over ``rounds`` rounds, each taking the
    next ``len(batches) // rounds`` of ``batches`` (each batch is appended once)."""
    best = float("inf")
    calls = len(batches) // rounds
    for round_number in range(rounds):
        chunk = batches[round_number * calls : (round_number + 1) * calls]
        start = time.thread_time_ns()
        for batch in chunk:
            append(batch)
        best = min(best, (time.thread_time_ns() - start) / calls / 1000)
    return best


def idempotent_batches(producer_id: int, count: int) -> list[bytes]:
    """``count`` one-record batches of ``producer_id`` (epoch 0) at sequences 0, 1, ..."""
    now_ms = SYSTEM_CLOCK.milliseconds()
    return [
        build_batch(
            [(now_ms, None, b"v" * 100, ())],
            producer_id=producer_id,
            producer_epoch=0,
            base_sequence=sequence,
        )
        for sequence in range(count)
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--label", default="", help="printed first, to tell versions apart")
    args = parser.parse_args()
    print(f"odradek from {Path(odradek.__file__).parent}")
    root = Path(tempfile.mkdtemp(prefix="odradek-request-path-"))
    manager = LogManager(BrokerConfig(log_dirs=(str(root),)))
    try:
        manager.startup()
        tp = TopicPartition("t", 0)
        TopicAdmin(manager, manager.config).create_topic("t", 1, {"segment.bytes": str(1024 * MB)})
        log = manager.get_log(tp)
        batch = build_batch([(SYSTEM_CLOCK.milliseconds(), None, b"v" * 100, ())])
        log.append(batch)

        if "commit" in inspect.signature(UnifiedLog.append).parameters:

            def produce() -> None:  # the HW raise made by the append itself
                log.append(batch, commit=True)

        else:  # an older version: the raise after the append

            def produce() -> None:
                log.append(batch)
                log.maybe_increment_high_watermark(log.log_end_offset_metadata)

        for _ in range(100):
            produce()
        warm_up = 100
        producer_batches = idempotent_batches(7, warm_up + args.calls // 5 * args.rounds)
        for producer_batch in producer_batches[:warm_up]:  # the first one registers it
            log.append(producer_batch, commit=True)
        isolation = FetchIsolation.HIGH_WATERMARK

        def produce_and_tail() -> None:  # and a consumer keeping up reads what it appended
            keeping_up_at = log.high_watermark
            produce()
            log.read(keeping_up_at, 1 * MB, isolation)

        figures = {
            "get_log": per_call_microseconds(lambda: manager.get_log(tp), args.calls, args.rounds),
            "append 1 record + HW": per_call_microseconds(produce, args.calls // 5, args.rounds),
            "idempotent append 1 record + HW": per_batch_microseconds(
                lambda records: log.append(records, commit=True),
                producer_batches[warm_up:],
                args.rounds,
            ),
            "append 1 record + HW + read it": per_call_microseconds(
                produce_and_tail, args.calls // 5, args.rounds
            ),
            "read at the end": per_call_microseconds(
                lambda: log.read(log.log_end_offset, 1 * MB, isolation), args.calls, args.rounds
            ),
        }
    finally:
        manager.shutdown()
        shutil.rmtree(root, ignore_errors=True)
    print(
        f"{args.label} us of thread CPU per call (best of {args.rounds}): "
        + ", ".join(f"{name} {value:.3f}" for name, value in figures.items())
    )


if __name__ == "__main__":
    main()
