"""docs/metrics.md lists exactly the series a broker exports, under the names it exports them."""

from __future__ import annotations

import re
from pathlib import Path

from server_helpers import running_broker

DOC = Path(__file__).resolve().parent.parent / "docs" / "metrics.md"
EXPOSED_NAME = {"counter": "{}_total", "histogram": "{}", "gauge": "{}"}
"""How a family of each type is named in the docs: as queried (counters with ``_total``)."""


def test_every_metric_is_documented_and_every_documented_one_exists(tmp_path: Path) -> None:
    with running_broker(tmp_path) as broker:
        families = list(broker.broker.metrics.registry.collect())
    exported = {
        EXPOSED_NAME[family.type].format(family.name)
        for family in families
        if family.name.startswith("odradek_")
    }
    documented = set(re.findall(r"^\| `(odradek_\w+)` \|", DOC.read_text(), re.MULTILINE))
    assert exported == documented, (exported - documented, documented - exported)
