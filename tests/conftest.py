"""Shared pytest fixtures."""

import pytest


@pytest.fixture
def python_segment_append(monkeypatch: pytest.MonkeyPatch) -> None:
    """LogSegment's append and roll check in Python, without the C module: for tests that fake
    ``os.pwrite``, which the C path does not call (it writes with pwrite(2) itself). Real
    write failures on the C path: tests/test_segment_append_native.py."""
    from odradek.storage import log_segment

    monkeypatch.setattr(log_segment, "_segment_append", None)
