"""Shared pytest fixtures, and the Hypothesis profiles.

Profiles: ``ci`` (selected by ``CI=true``) runs every property test's full budget, derandomized
so that a CI run is reproducible, and prints the blob that replays a failure; ``dev`` (the
default) runs a quarter of each budget with fresh random examples, remembered in the local
example database so a failure found once is tried first next time. ``HYPOTHESIS_PROFILE=ci``
gives a local run CI's budgets. tests/hypothesis_budget.py scales the budgets.
"""

import json
import os
import shutil
import tempfile
from pathlib import Path
from typing import Any

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


WITHOUT_HYPOTHESIS = Path(__file__).parent / "without_hypothesis"


def pytest_configure(config: pytest.Config) -> None:
    """Processes the tests start (brokers, clients, scripts) import no Hypothesis, as where
    odradek is installed without its test extras (tests/without_hypothesis). Not in the
    controlling process of a parallel run, whose workers are tests' processes themselves."""
    if getattr(config.option, "dist", "no") != "no" and not hasattr(config, "workerinput"):
        return
    paths = [str(WITHOUT_HYPOTHESIS), os.environ.get("PYTHONPATH", "")]
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, paths))


@pytest.fixture
def python_append_path(monkeypatch: pytest.MonkeyPatch) -> None:
    """Segments lend their append state to the Python twin, not the C type: for tests that fake
    ``os.pwrite``, which the C type does not call (it calls pwrite(2) itself). Real write
    failures on the C type: tests/test_segment_append_state.py."""
    from odradek.storage import segment_append_state

    monkeypatch.setattr(
        segment_append_state, "SegmentAppendState", segment_append_state.PythonSegmentAppendState
    )


# Parallel runs (pytest-xdist; `make test` and `make test-fast` use it): most of the suite waits
# on processes and sockets, so several workers share two cores well. Tests that share a fixture
# wider than one test (a module's broker, a Spark session) run on one worker, one after the
# other, so what the fixture starts is started once; every other test is scheduled on its own.
# The workers work out the groups while collecting (only they see fixtures) and leave them in a
# file for the scheduler in the controlling process (pytest-xdist's own `xdist_group` marks are
# lost on pytest 9.2, whose node ids can no longer be rewritten).
_GROUPS_FILE = "odradek_test_groups_file"
_groups_dir = pytest.StashKey[Path]()


def _shared_fixture_group(item: pytest.Item) -> str | None:
    """The group of a test that shares a fixture defined in this project with other tests
    (pytest's own wide fixtures, such as tmp_path_factory, cost nothing to share), or None."""
    fixture_info = getattr(item, "_fixtureinfo", None)
    if fixture_info is None:
        return None
    shared = [
        definitions[-1]
        for definitions in fixture_info.name2fixturedefs.values()
        if definitions and definitions[-1].scope != "function" and definitions[-1].baseid
    ]
    for definition in shared:
        if definition.scope == "session":
            return f"{definition.baseid}::{definition.argname}"
    return item.nodeid.split("::", 1)[0] if shared else None


def _weight(item: pytest.Item) -> int:
    """Where the test is scheduled: the longest kinds first, so none starts last."""
    cls = getattr(item, "cls", None)
    ranks = (
        item.get_closest_marker("spark") is not None,
        item.get_closest_marker("reference_kafka") is not None,
        cls is not None and cls.__module__ == "hypothesis.stateful",  # whole state machines
        item.get_closest_marker("slow") is not None,
        getattr(getattr(item, "obj", None), "is_hypothesis_test", False),
    )
    return next((rank for rank, heavy in enumerate(ranks) if heavy), len(ranks))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:  # a test on the Spark session starts a JVM: `-m "not spark"` leaves it out
        if "spark" in getattr(item, "fixturenames", ()) and not item.get_closest_marker("spark"):
            item.add_marker(pytest.mark.spark)
    workerinput = getattr(config, "workerinput", None)
    if workerinput is None or _GROUPS_FILE not in workerinput:
        return
    items.sort(key=_weight)
    groups = {item.nodeid: group for item in items if (group := _shared_fixture_group(item))}
    path = Path(workerinput[_GROUPS_FILE])
    written = path.with_name(f"{path.name}.{workerinput['workerid']}")
    written.write_text(json.dumps(groups))
    os.replace(written, path)


@pytest.hookimpl(optionalhook=True)
def pytest_configure_node(node: Any) -> None:
    """Tell each worker where to leave the groups (pytest-xdist's controller)."""
    config = node.config
    if config.getoption("dist") != "loadgroup":
        return
    if _groups_dir not in config.stash:
        config.stash[_groups_dir] = Path(tempfile.mkdtemp(prefix="odradek-test-groups-"))
    node.workerinput[_GROUPS_FILE] = str(config.stash[_groups_dir] / "groups.json")


def pytest_unconfigure(config: pytest.Config) -> None:
    if _groups_dir in config.stash:
        shutil.rmtree(config.stash[_groups_dir], ignore_errors=True)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Any) -> Any:
    """``--dist loadgroup``: the groups the workers found, in the order they collected them."""
    if config.getoption("dist") != "loadgroup":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class SharedFixtureScheduling(LoadScopeScheduling):
        def __init__(self, config: pytest.Config, log: Any = None) -> None:
            super().__init__(config, log)
            config.option.loadscopereorder = False  # the workers' order: the longest first
            self._groups: dict[str, str] | None = None

        def _split_scope(self, nodeid: str) -> str:
            if self._groups is None:  # read once every worker has collected
                self._groups = json.loads((config.stash[_groups_dir] / "groups.json").read_text())
            return self._groups.get(nodeid, nodeid)

    return SharedFixtureScheduling(config, log)
