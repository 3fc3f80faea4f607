"""LogManager under storage failures: a failed log dir goes offline, a full disk does not."""

from __future__ import annotations

import errno
import os
import resource
import subprocess
from contextlib import contextmanager

import pytest
from log_helpers import append, batch, read_all
from log_manager_helpers import broker_config, running, topic_admin, wait_until

from odradek.config.broker_config import BrokerConfig
from odradek.errors import KafkaStorageError
from odradek.storage.log_manager import (
    CLEAN_SHUTDOWN_FILE_NAME,
    RECOVERY_POINT_CHECKPOINT_FILE,
    LogManager,
)
from odradek.topic_partition import TopicPartition

ORDERS_0 = TopicPartition("orders", 0)
ORDERS_1 = TopicPartition("orders", 1)


def failing(error_number):
    def fail(*args, **kwargs):
        raise OSError(error_number, os.strerror(error_number))

    return fail


def offsets(log):
    return [record.offset for record in read_all(log, upper="end")]


# --- an I/O error takes one log dir offline ---------------------------------------------------


@pytest.mark.usefixtures("python_append_path")
@pytest.mark.parametrize("failing_call", ["pwrite", "fdatasync"])
def test_io_error_takes_only_its_dir_offline(tmp_path, monkeypatch, failing_call):
    config = broker_config(tmp_path)
    with running(config) as manager:
        topic_admin(manager).create_topic("orders", 2)
        broken, healthy = manager.get_log(ORDERS_0), manager.get_log(ORDERS_1)
        append(broken, batch(2))
        append(healthy, batch(2))
        monkeypatch.setattr(os, failing_call, failing(errno.EIO))
        with pytest.raises(KafkaStorageError, match="orders-0"):
            if failing_call == "pwrite":
                broken.append(batch(1))
            else:
                broken.flush()
        monkeypatch.undo()

        assert manager.offline_log_dirs == {tmp_path / "d0"}
        with pytest.raises(KafkaStorageError, match=f"orders-0 is offline: .*{tmp_path / 'd0'}"):
            manager.get_log(ORDERS_0)
        with pytest.raises(KafkaStorageError):
            topic_admin(manager).describe_topic("orders")
        wait_until(lambda: manager.all_logs() == [healthy])
        assert manager.partitions("orders") == [ORDERS_0, ORDERS_1]

        append(manager.get_log(ORDERS_1), batch(1))
        assert offsets(healthy) == [0, 1, 2]
        assert manager.describe_partition(ORDERS_1).log_end_offset == 3
        assert {tp.partition for tp in topic_admin(manager).create_topic("new", 2)} == {0, 1}
        assert all(log.dir.parent == tmp_path / "d1" for log in manager.all_logs())

    assert not (tmp_path / "d0" / CLEAN_SHUTDOWN_FILE_NAME).exists()
    assert (tmp_path / "d1" / CLEAN_SHUTDOWN_FILE_NAME).exists()
    with running(config) as manager:
        assert manager.offline_log_dirs == frozenset()
        assert offsets(manager.get_log(ORDERS_0)) == [0, 1]


def test_a_failed_dir_stops_serving_its_logs_before_they_close(tmp_path):
    """get_log answers from the logs it serves: a directory failing drops its logs from them
    at once (the close runs later on a scheduler thread), the other directory's stay."""
    with running(broker_config(tmp_path)) as manager:
        topic_admin(manager).create_topic("orders", 2)
        failed = {tp for tp in (ORDERS_0, ORDERS_1) if manager.get_log(tp).log_dir.name == "d0"}
        assert len(failed) == 1
        healthy = manager.get_log(ORDERS_1 if ORDERS_0 in failed else ORDERS_0)
        manager.scheduler.shutdown()  # the close never runs: only the failure itself counts
        manager.failure_channel.maybe_add_offline_log_dir(tmp_path / "d0", "test")
        for tp in failed:
            with pytest.raises(KafkaStorageError, match=f"{tp} is offline"):
                manager.get_log(tp)
        assert manager.get_log(healthy.topic_partition) is healthy


def test_a_log_a_racing_failure_report_dropped_is_served_again_while_its_dir_is_online(
    tmp_path,
):
    """A directory failure drops its logs from the ones get_log serves without the manager's
    lock, so it may drop a log registered meanwhile elsewhere: get_log then finds it the long
    way, still online, and serves it again."""
    with running(broker_config(tmp_path)) as manager:
        topic_admin(manager).create_topic("orders", 1)
        log = manager.get_log(ORDERS_0)
        manager._serving.pop(ORDERS_0)  # as a racing _on_log_dir_offline would
        assert manager.get_log(ORDERS_0) is log
        assert manager._serving[ORDERS_0] is log


def test_checkpoints_skip_offline_dirs(tmp_path):
    with running(broker_config(tmp_path)) as manager:
        topic_admin(manager).create_topic("orders", 2)
        manager.checkpoint_log_recovery_offsets()
        before = (tmp_path / "d0" / RECOVERY_POINT_CHECKPOINT_FILE).read_text()
        append(manager.get_log(ORDERS_0), batch(3))
        append(manager.get_log(ORDERS_1), batch(3))
        manager.get_log(ORDERS_0).flush()
        manager.get_log(ORDERS_1).flush()
        manager.failure_channel.maybe_add_offline_log_dir(tmp_path / "d0", "test")
        manager.checkpoint_log_recovery_offsets()
        assert (tmp_path / "d0" / RECOVERY_POINT_CHECKPOINT_FILE).read_text() == before
        assert "orders 1 3" in (tmp_path / "d1" / RECOVERY_POINT_CHECKPOINT_FILE).read_text()


def test_failed_checkpoint_write_takes_the_dir_offline(tmp_path, monkeypatch):
    with running(broker_config(tmp_path)) as manager:
        topic_admin(manager).create_topic("orders", 2)
        monkeypatch.setattr(os, "fsync", failing(errno.EIO))
        manager.checkpoint_high_watermarks()
        monkeypatch.undo()
        assert manager.offline_log_dirs == {tmp_path / "d0", tmp_path / "d1"}
        with pytest.raises(KafkaStorageError, match="replication-offset-checkpoint"):
            manager.get_log(ORDERS_1)


def test_unusable_dir_at_startup_is_offline_and_the_others_serve(tmp_path):
    (tmp_path / "d0").write_text("a file where a directory should be")
    with running(broker_config(tmp_path)) as manager:
        assert manager.offline_log_dirs == {tmp_path / "d0"}
        topic_admin(manager).create_topic("orders", 2)
        assert {log.dir.parent for log in manager.all_logs()} == {tmp_path / "d1"}


def test_startup_fails_when_no_dir_is_usable(tmp_path):
    (tmp_path / "d0").write_text("not a directory")
    with pytest.raises(KafkaStorageError, match="none of the log directories"):
        with running(broker_config(tmp_path, dirs=1)):
            pass


# --- running out of descriptors fails the operation, never the directory -------------------


@contextmanager
def out_of_descriptors():
    """Lower this process's descriptor limit to the lowest free descriptor number: every
    open() fails with EMFILE until the block ends."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    lowest_free = os.dup(0)
    os.close(lowest_free)
    resource.setrlimit(resource.RLIMIT_NOFILE, (lowest_free, hard))
    try:
        yield
    finally:
        resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def test_running_out_of_descriptors_fails_the_roll_and_leaves_the_dir_online(tmp_path):
    with running(broker_config(tmp_path, dirs=1)) as manager:
        topic_admin(manager).create_topic("rolling", 1, {"segment.ms": "1000"})
        topic_admin(manager).create_topic("steady", 1)
        rolling = manager.get_log(TopicPartition("rolling", 0))
        steady = manager.get_log(TopicPartition("steady", 0))
        append(rolling, batch(1, timestamp=1_000))
        append(steady, batch(1))
        with out_of_descriptors():
            with pytest.raises(KafkaStorageError, match="Too many open files.*stays online") as e:
                rolling.append(batch(1, timestamp=10_000))  # must roll: no file for it
            assert e.value.retriable
            assert append(steady, batch(1)).first_offset == 1
        assert manager.offline_log_dirs == frozenset()
        # Nothing written; the roll itself may have got its file before the append's index
        # files ran out (an empty active segment, which the next append fills).
        assert rolling.log_end_offset == 1 and rolling.number_of_segments in (1, 2)
        assert offsets(rolling) == [0]

        assert append(rolling, batch(1, timestamp=10_000)).first_offset == 1
        assert rolling.number_of_segments == 2
        assert offsets(manager.get_log(TopicPartition("rolling", 0))) == [0, 1]
        assert offsets(manager.get_log(TopicPartition("steady", 0))) == [0, 1]


def test_reports_of_descriptor_exhaustion_leave_the_dir_online(tmp_path):
    with running(broker_config(tmp_path, dirs=1)) as manager:
        for number in (errno.EMFILE, errno.ENFILE):
            error = OSError(number, os.strerror(number))
            assert not manager.failure_channel.maybe_add_offline_log_dir(tmp_path, "x", error)
        assert manager.offline_log_dirs == frozenset()


def test_running_out_of_descriptors_at_startup_stops_the_startup(tmp_path):
    config = broker_config(tmp_path, dirs=1)
    with running(config) as manager:
        topic_admin(manager).create_topic("orders", 2)
    manager = LogManager(config)
    with out_of_descriptors(), pytest.raises(KafkaStorageError, match="ulimit -n"):
        manager.startup()
    with running(config) as manager:
        assert manager.partitions("orders") == [ORDERS_0, ORDERS_1]


# --- a full disk fails the append, and only the append ----------------------------------------


@pytest.mark.usefixtures("python_append_path")
def test_injected_full_disk_fails_the_append_whole_and_the_log_recovers(tmp_path, monkeypatch):
    with running(broker_config(tmp_path, dirs=1)) as manager:
        topic_admin(manager).create_topic("orders", 1)
        log = manager.get_log(ORDERS_0)
        append(log, batch(2))
        size = log.size_in_bytes
        segment_file = log.active_segment.log.path
        real_pwrite = os.pwrite
        calls = []

        def half_then_full(fd, data, offset):
            calls.append(len(data))
            if len(calls) == 1:
                return real_pwrite(fd, bytes(data)[: len(data) // 2], offset)
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

        monkeypatch.setattr(os, "pwrite", half_then_full)
        with pytest.raises(KafkaStorageError, match="No space left on device"):
            log.append(batch(3, value_size=500))
        monkeypatch.undo()

        assert len(calls) == 2
        assert manager.offline_log_dirs == frozenset()
        assert log.size_in_bytes == size == os.path.getsize(segment_file)
        assert log.log_end_offset == 2 and offsets(log) == [0, 1]
        assert append(log, batch(1)).first_offset == 2
        assert offsets(manager.get_log(ORDERS_0)) == [0, 1, 2]


@pytest.fixture
def tiny_tmpfs(tmp_path):
    mount_point = tmp_path / "tiny"
    mount_point.mkdir()
    result = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(mount_point)],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {result.stderr.strip() or result.returncode}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", str(mount_point)], check=True)


def test_real_full_disk_fails_appends_until_space_is_back(tiny_tmpfs):
    filler = tiny_tmpfs / "filler"
    with running(BrokerConfig(log_dirs=(str(tiny_tmpfs),))) as manager:
        topic_admin(manager).create_topic("orders", 1)
        log = manager.get_log(ORDERS_0)
        filler.write_bytes(b"\0" * 64 * 1024)
        appended = 0
        with pytest.raises(KafkaStorageError, match="No space left on device"):
            for _ in range(100):
                append(log, batch(1, value_size=8000))
                appended += 1
        assert appended > 0
        assert manager.offline_log_dirs == frozenset()
        assert log.log_end_offset == appended
        assert os.path.getsize(log.active_segment.log.path) == log.size_in_bytes
        assert offsets(log) == list(range(appended))

        filler.unlink()
        assert append(log, batch(1, value_size=8000)).first_offset == appended
        assert offsets(manager.get_log(ORDERS_0)) == list(range(appended + 1))


def test_failed_rename_on_delete_leaves_the_partition_offline(tmp_path, monkeypatch):
    with running(broker_config(tmp_path)) as manager:
        topic_admin(manager).create_topic("orders", 2)
        monkeypatch.setattr(os, "rename", failing(errno.EIO))
        topic_admin(manager).delete_topic("orders")
        monkeypatch.undo()
        assert manager.offline_log_dirs == {tmp_path / "d0", tmp_path / "d1"}
        assert manager.topics() == ["orders"]
        with pytest.raises(KafkaStorageError, match="cannot rename"):
            manager.get_log(ORDERS_0)
