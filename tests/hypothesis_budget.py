"""How many examples a property test runs under the loaded Hypothesis profile (no tests here).

tests/conftest.py loads the ``ci`` profile under ``CI=true`` and ``dev`` otherwise. A test
written with ``max_examples=examples(250)`` runs 250 examples under ``ci`` and a quarter of
them under ``dev``, so the fast local loop stays fast and CI explores as much as it always did.
"""

from __future__ import annotations

from hypothesis import settings

CI_EXAMPLES = 100
"""``max_examples`` of the ci profile: the scale the budgets are written in."""
MIN_EXAMPLES = 10


def examples(ci_budget: int) -> int:
    """``ci_budget`` scaled to the loaded profile (never below MIN_EXAMPLES)."""
    return max(MIN_EXAMPLES, ci_budget * settings.default.max_examples // CI_EXAMPLES)
