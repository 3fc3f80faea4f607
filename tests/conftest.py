"""Shared pytest fixtures, and the Hypothesis profiles.

Profiles: ``ci`` (selected by ``CI=true``) runs every property test's full budget, derandomized
so that a CI run is reproducible, and prints the blob that replays a failure; ``dev`` (the
default) runs a quarter of each budget with fresh random examples, remembered in the local
example database so a failure found once is tried first next time. ``HYPOTHESIS_PROFILE=ci``
gives a local run CI's budgets. tests/hypothesis_budget.py scales the budgets.
"""

import os

import pytest
from hypothesis import HealthCheck, settings
from hypothesis_budget import CI_EXAMPLES

settings.register_profile(
    "ci",
    max_examples=CI_EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "dev",
    max_examples=CI_EXAMPLES // 4,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(
    os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if os.environ.get("CI") == "true" else "dev")
)


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
