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
    """Segments lend their append state to the Python twin, not the C type: for tests that fake
    ``os.pwrite``, which the C type does not call (it calls pwrite(2) itself). Real write
    failures on the C type: tests/test_segment_append_state.py."""
    from odradek.storage import segment_append_state

    monkeypatch.setattr(
        segment_append_state, "SegmentAppendState", segment_append_state.PythonSegmentAppendState
    )
