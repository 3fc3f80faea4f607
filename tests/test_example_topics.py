"""The example pipeline's topic configs (examples/click_topics.py) make compaction visible
within about a minute of counts arriving, on a broker with the default cleaner settings."""

from __future__ import annotations

import importlib
import sys
import time
from pathlib import Path

import pytest
from serve_process import ServeProcess

from odradek.client import Admin, Consumer, Producer
from odradek.topic_partition import TopicPartition

EXAMPLES = Path(__file__).parents[1] / "examples"
PAGES = 5


@pytest.mark.slow
def test_counts_written_every_few_seconds_get_compacted_within_a_minute(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(EXAMPLES))
    click_topics = importlib.import_module("click_topics")
    with ServeProcess(tmp_path / "data") as broker:
        click_topics.ensure_pipeline_topics(broker.bootstrap, "clicks", "counts")
        with Admin(bootstrap_servers=broker.bootstrap) as admin:
            configs = admin.describe_configs(["counts"])["counts"]
        assert {name: configs[name].value for name in click_topics.COUNTS_CONFIGS} == (
            click_topics.COUNTS_CONFIGS
        )
        written = 0
        deadline = time.monotonic() + 120
        with Producer(bootstrap_servers=broker.bootstrap, linger_ms=0) as producer:
            while time.monotonic() < deadline:  # as the streaming job writes its totals
                for page in range(PAGES):
                    producer.send("counts", str(written).encode(), f"page-{page}".encode())
                    written += 1
                producer.flush()
                stored = _records(broker.bootstrap)
                if written > 10 * PAGES and len(stored) < written:
                    break
                time.sleep(2)
        stored = _records(broker.bootstrap)
        assert len(stored) < written, f"nothing compacted in 120 s ({written} records)"
        latest = {key: value for key, value in stored}  # the last count of each page stays
        assert latest == {
            f"page-{p}".encode(): str(written - PAGES + p).encode() for p in range(PAGES)
        }
        print(f"{written} counts written, {len(stored)} stored", file=sys.stderr)


def _records(bootstrap: str) -> list[tuple[bytes, bytes]]:
    tp = TopicPartition("counts", 0)
    with Consumer(bootstrap_servers=bootstrap, auto_offset_reset="earliest") as consumer:
        consumer.assign([tp])
        consumer.seek_to_beginning(tp)
        end = consumer.end_offsets([tp])[tp]
        records = []
        while consumer.position(tp) < end:
            records += [(r.key, r.value) for r in consumer.poll(1000)]
    return records
