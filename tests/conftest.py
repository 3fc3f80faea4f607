"""Shared pytest fixtures."""

import pytest


@pytest.fixture
def python_append_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """The append in Python, without the C modules of Log and LogSegment: for tests that fake
    ``os.pwrite``, which the C path does not call (it writes with pwrite(2) itself). Real
    write failures on the C path: tests/test_segment_append_native.py."""
    from odradek.storage import log, log_segment

    monkeypatch.setattr(log, "_log_append", None)
    monkeypatch.setattr(log_segment, "_segment_append", None)


@pytest.fixture(params=["native", "python"])
def either_append_path(request: pytest.FixtureRequest) -> str:
    """The test once on the C append path and once on Log's and LogSegment's Python steps,
    for behaviour both implement."""
    if request.param == "python":
        request.getfixturevalue("python_append_path")
    return request.param
