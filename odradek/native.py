"""Which of odradek's C modules are active (docs/native.md): for the broker's start-up log,
``odradek --version`` and the CI check that a wheel built from the sdist has them all.

Each module is optional; without one the same loops run in Python, several times slower.
"""

from __future__ import annotations

import importlib

NATIVE_MODULES = (
    "odradek.record._record_scan",
    "odradek.storage._segment_append_state",
    "odradek.storage._producer_table",
    "odradek.record._record_codec",
    "odradek.cleaner._offset_map",
)


def native_modules() -> dict[str, bool]:
    """Each C module's name and whether it imports."""
    active = {}
    for name in NATIVE_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            active[name] = False
        else:
            active[name] = True
    return active


def native_summary() -> str:
    """One line naming each C module and whether it is active."""
    states = ", ".join(
        f"{name} {'active' if active else 'NOT BUILT (Python fallback, slower)'}"
        for name, active in native_modules().items()
    )
    return f"native modules: {states}"
