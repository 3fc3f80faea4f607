"""Which C modules are active is said where a user looks: ``odradek --version`` and the
broker's start-up log; and every C source in the tree is declared and reported."""

from __future__ import annotations

import logging
import re
from importlib.metadata import version
from pathlib import Path

from click.testing import CliRunner

from odradek.cli.main import cli
from odradek.native import NATIVE_MODULES, native_modules, native_summary
from tests.server_helpers import running_broker

ROOT = Path(__file__).resolve().parent.parent


def test_every_c_source_is_a_declared_and_reported_module() -> None:
    sources = sorted(path.relative_to(ROOT).as_posix() for path in ROOT.glob("odradek/*/*.c"))
    assert sources == sorted(name.replace(".", "/") + ".c" for name in NATIVE_MODULES)
    setup = (ROOT / "setup.py").read_text()
    for name, source in zip(sorted(NATIVE_MODULES), sorted(sources), strict=True):
        assert f'"{name}", "{source}"' in re.sub(r"\s+", " ", setup)


def test_the_modules_are_active_here() -> None:
    """CI has a C compiler: a module that did not build must fail it, not slow it down."""
    assert native_modules() == dict.fromkeys(NATIVE_MODULES, True)


def test_version_says_which_modules_are_active() -> None:
    result = CliRunner().invoke(cli, ["--version"])
    assert result.exit_code == 0
    lines = result.output.splitlines()
    assert lines[0] == f"odradek {version('odradek')}"
    assert lines[1] == native_summary()
    for name in NATIVE_MODULES:
        assert f"{name} active" in lines[1]


def test_the_broker_logs_them_at_start_up(tmp_path: Path, caplog) -> None:
    with caplog.at_level(logging.INFO, logger="odradek.server.broker"):
        with running_broker(tmp_path):
            pass
    starting = [r.getMessage() for r in caplog.records if "starting" in r.getMessage()]
    assert starting == [f"broker 0 starting; {native_summary()}"]
