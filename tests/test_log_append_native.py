"""Log.append's common case in C (_log_append.c) against its Python steps (Log._append_steps):
the same requests return the same LogAppendInfo or raise the same error, and leave the same
log (log end, high watermark, log start offset, recovery point, segments and their bytes);
and whatever the C path does not do itself reaches the Python steps with nothing changed."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from odradek.clock import MockClock
from odradek.config.log_config import LogConfig
from odradek.storage import log as log_module
from odradek.storage.log import Log
from odradek.storage.scheduler import Scheduler
from tests.log_helpers import BASE_TIME_MS, batch, open_log


def test_the_c_append_is_built() -> None:
    """Without it every append runs Log's Python steps (docs/native.md)."""
    assert log_module._log_append is not None


@contextmanager
def python_path() -> Iterator[None]:
    native = log_module._log_append
    log_module._log_append = None
    try:
        yield
    finally:
        log_module._log_append = native


def request_of(shapes: list[tuple[int, int, int, bool]]) -> bytes:
    """Batches of (records, value size, timestamp step from the base time, keyed) back to
    back."""
    return b"".join(
        batch(count, value_size=size, timestamp=BASE_TIME_MS + step, key=b"k" if keyed else None)
        for count, size, step, keyed in shapes
    )


def corrupted(request: bytes, position: int) -> bytes:
    """``request`` with one byte flipped at ``position`` (modulo its length)."""
    at = position % len(request)
    return request[:at] + bytes([request[at] ^ 0x40]) + request[at + 1 :]


def state(log: Log) -> dict[str, object]:
    """All an append changes in a log, down to the bytes of each segment."""
    return {
        "log end": log.log_end_offset_metadata,
        "high watermark": log._high_watermark,
        "log start offset": log.log_start_offset,
        "recovery point": log.recovery_point,
        "segments": [
            (segment.base_offset, segment.log.read(0, segment.size))
            for segment in log.segments.values()
        ],
    }


@contextmanager
def log_without_background_tasks(
    directory: Path, config: LogConfig, clock: MockClock
) -> Iterator[Log]:
    """A Log whose scheduler runs nothing until the end: a roll's flush would otherwise move
    the recovery point at a moment of its own thread's choosing."""
    scheduler = Scheduler()
    log = Log.open(directory, config, scheduler, clock=clock)
    try:
        yield log
    finally:
        log.close()
        scheduler.shutdown(run_pending_one_offs=True)


def take_step(log: Log, clock: MockClock, step: tuple) -> str:
    """Do ``step`` to ``log``; what it returned or raised, as text to compare."""
    kind = step[0]
    try:
        if kind == "append":
            _, shapes, corrupt_at, waited_ms = step
            clock.sleep(waited_ms)
            request = request_of(shapes)
            if corrupt_at is not None:
                request = corrupted(request, corrupt_at)
            return repr(log.append(request, leader_epoch=3))
        if kind == "commit":  # as the partition does after acks
            return repr(log.update_high_watermark(log.log_end_offset))
        if kind == "delete records":
            return repr(log.delete_records(min(step[1], log.high_watermark)))
        if kind == "truncate":
            return repr(log.truncate_to(step[1]))
        return repr(log.roll().base_offset)
    except Exception as error:  # noqa: BLE001 - the two paths must fail alike
        message = str(error).replace("/native/", "/").replace("/python/", "/")
        return f"{type(error).__name__}: {message}"


request_shapes = st.lists(
    st.tuples(
        st.integers(1, 5),  # records
        st.integers(0, 400),  # value size
        st.sampled_from([0, 5, -20, 10**9]),  # timestamp step: far ahead is out of range
        st.sampled_from([True, True, True, False]),  # keyed: a compacted log wants keys
    ),
    min_size=1,
    max_size=3,
)
appends = st.tuples(
    st.just("append"),
    request_shapes,
    st.one_of(st.none(), st.none(), st.none(), st.integers(0, 10**6)),  # a flipped byte
    st.sampled_from([0, 0, 1, 400]),  # ms waited first: past segment.ms (300) rolls
)
steps = st.lists(
    st.one_of(
        appends,
        appends,  # appends are most of what a log sees
        appends,
        st.tuples(st.just("commit")),
        st.tuples(st.just("delete records"), st.integers(0, 60)),
        st.tuples(st.just("truncate"), st.integers(0, 60)),
        st.tuples(st.just("roll")),
    ),
    min_size=1,
    max_size=30,
)
configs = st.builds(
    LogConfig,
    cleanup_policy=st.sampled_from(["delete", "compact"]),
    compression_type=st.sampled_from(["producer", "producer", "lz4", "uncompressed"]),
    message_timestamp_type=st.sampled_from(["CreateTime", "LogAppendTime"]),
    message_timestamp_after_max_ms=st.sampled_from([3_600_000, 2**62]),
    max_message_bytes=st.sampled_from([1_000_000, 1500]),
    segment_bytes=st.sampled_from([3000, 1_000_000]),
    segment_ms=st.just(300),
    flush_messages=st.sampled_from([2**62, 7]),
    index_interval_bytes=st.sampled_from([0, 4096]),
)


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(steps=steps, config=configs)
def test_both_paths_leave_the_same_log(
    tmp_path: Path, steps: list[tuple], config: LogConfig
) -> None:
    run = len(list(tmp_path.iterdir()))
    clocks = {name: MockClock(BASE_TIME_MS) for name in ("native", "python")}
    with ExitStack() as stack:
        logs = {
            name: stack.enter_context(
                log_without_background_tasks(tmp_path / str(run) / name / "t-0", config, clock)
            )
            for name, clock in clocks.items()
        }
        for step in steps:
            with python_path():
                python = take_step(logs["python"], clocks["python"], step)
            native = take_step(logs["native"], clocks["native"], step)
            assert native == python, step
            assert state(logs["native"]) == state(logs["python"]), step


def test_the_common_case_never_reaches_the_python_steps(tmp_path: Path, monkeypatch) -> None:
    """A change to the log's attributes that made the C path decline every time would leave
    every test green and every append slower; this one would fail."""
    with open_log(tmp_path / "t-0", LogConfig(index_interval_bytes=100)) as log:
        log.append(batch(3))  # a segment's first batch is the segment's Python steps' work

        def python_steps(*args: object, **kwargs: object) -> None:
            raise AssertionError("the C path declined the common case")

        monkeypatch.setattr(Log, "_append_steps", python_steps)
        for step in range(20):
            info = log.append(batch(3, value_size=100, timestamp=BASE_TIME_MS + step))
            assert info.last_offset == log.log_end_offset - 1 == 3 * step + 5
        assert log.log_end_offset_metadata.relative_position_in_segment == log.size_in_bytes


@pytest.mark.parametrize(
    ("config", "request_bytes"),
    [
        pytest.param(LogConfig(compression_type="lz4"), batch(3), id="a codec the broker applies"),
        pytest.param(LogConfig(), corrupted(batch(3), 30), id="a corrupt batch"),
        pytest.param(
            LogConfig(segment_bytes=200), batch(3, value_size=60), id="larger than a segment"
        ),
        pytest.param(
            LogConfig(segment_bytes=300), batch(3, value_size=60), id="a segment that must roll"
        ),
        pytest.param(
            LogConfig(cleanup_policy="compact"), batch(1, key=None), id="keyless, compacted"
        ),
    ],
)
def test_what_the_c_path_leaves_to_the_python_steps(
    tmp_path: Path, monkeypatch, config: LogConfig, request_bytes: bytes
) -> None:
    """Each reaches the Python steps once, with the log as the C path found it."""
    with open_log(tmp_path / "t-0", config) as log:
        log.append(batch(1))  # 79 bytes; the request is 268 bytes
        before = state(log)
        seen = []
        python_steps = Log._append_steps

        def counted(self: Log, *args: object) -> object:
            seen.append(state(self))
            return python_steps(self, *args)

        monkeypatch.setattr(Log, "_append_steps", counted)
        try:
            log.append(request_bytes)
        except Exception:  # noqa: BLE001 - some of them are refused; where is what counts
            pass
        assert seen == [before]
