"""LogDirFailureChannel: first report takes a directory offline and notifies once."""

from __future__ import annotations

from pathlib import Path

from odradek.storage.log_dir_failure_channel import LogDirFailureChannel


def test_first_report_takes_the_dir_offline_and_notifies_listeners_once():
    channel = LogDirFailureChannel()
    notified = []
    channel.add_listener(notified.append)
    assert channel.maybe_add_offline_log_dir(Path("/d1"), "disk gone", OSError(5, "EIO"))
    assert not channel.maybe_add_offline_log_dir(Path("/d1"), "again")
    assert notified == [Path("/d1")]
    assert channel.is_offline(Path("/d1")) and not channel.is_offline(Path("/d2"))
    assert channel.reason(Path("/d1")) == "disk gone"
    assert channel.reason(Path("/d2")) is None
    assert channel.offline_log_dirs == frozenset({Path("/d1")})
