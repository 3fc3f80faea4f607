"""A real Prometheus (Debian's ``prometheus`` binary) scrapes ``odradek serve``: the target is up
and a partition's log end offset is what the test produced. ``promtool`` accepts the config and
alerts that docker-compose.yml gives Prometheus.

Skipped when ``prometheus`` is not installed, except in CI (``CI=true``), where that fails.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
import urllib.parse
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from serve_process import ServeProcess, free_port

from odradek.client import Admin, NewTopic, Producer

pytestmark = [pytest.mark.prometheus, pytest.mark.slow]

ROOT = Path(__file__).resolve().parent.parent
SCRAPE_INTERVAL = "1s"
WAIT_S = 60.0
RECORDS = 25


def installed(program: str) -> str:
    """The path of ``program`` (a part of Debian's prometheus package): skip the test without
    it, or fail in CI, where it must be there."""
    binary = shutil.which(program)
    if binary:
        return binary
    if os.environ.get("CI") == "true":
        pytest.fail(f"{program} is not installed; CI installs Debian's prometheus (.ci/run)")
    pytest.skip(f"{program} is not installed: apt-get install prometheus (Debian's package)")


@contextmanager
def prometheus(binary: str, directory: Path, target: str) -> Iterator[str]:
    """Prometheus scraping ``target`` every second; yields its base URL."""
    config = directory / "prometheus.yml"
    config.write_text(
        f"global:\n  scrape_interval: {SCRAPE_INTERVAL}\n"
        "scrape_configs:\n"
        "  - job_name: odradek\n"
        f"    static_configs:\n      - targets: ['{target}']\n"
    )
    address = f"127.0.0.1:{free_port()}"
    command = [
        binary,
        f"--config.file={config}",
        f"--storage.tsdb.path={directory / 'tsdb'}",
        f"--web.listen-address={address}",
    ]
    log = (directory / "prometheus.log").open("w")
    process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT)
    try:
        yield f"http://{address}"
    finally:
        process.terminate()
        process.wait(timeout=30)
        log.close()


def query(base_url: str, promql: str) -> list[dict]:
    """The result vector of an instant query; empty while Prometheus is not answering yet."""
    url = f"{base_url}/api/v1/query?{urllib.parse.urlencode({'query': promql})}"
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            answer = json.load(response)
    except OSError:
        return []
    assert answer["status"] == "success", answer
    return answer["data"]["result"]


def wait_for_value(base_url: str, promql: str, expected: float, log: Path) -> None:
    """Poll until ``promql`` has one sample equal to ``expected``."""
    deadline = time.monotonic() + WAIT_S
    result: list[dict] = []
    while time.monotonic() < deadline:
        result = query(base_url, promql)
        if len(result) == 1 and float(result[0]["value"][1]) == expected:
            return
        time.sleep(0.25)
    raise AssertionError(
        f"{promql} never equalled {expected} (last: {result}); prometheus log:\n"
        + log.read_text()[-4000:]
    )


def test_prometheus_scrapes_the_broker(tmp_path: Path) -> None:
    binary = installed("prometheus")
    with ServeProcess(tmp_path / "data") as broker:
        with Admin(bootstrap_servers=broker.bootstrap) as admin:
            admin.create_topics([NewTopic("scraped", 2)])
        producer = Producer(bootstrap_servers=broker.bootstrap, acks="all", linger_ms=0)
        try:
            for number in range(RECORDS):
                producer.send("scraped", b"record-%d" % number, partition=1)
            producer.flush()
        finally:
            producer.close()
        target = f"127.0.0.1:{broker.metrics_port}"
        with prometheus(binary, tmp_path, target) as url:
            log = tmp_path / "prometheus.log"
            wait_for_value(url, f'up{{job="odradek",instance="{target}"}}', 1, log)
            end_offset = 'odradek_log_end_offset{topic="scraped",partition="%d"}'
            wait_for_value(url, end_offset % 1, RECORDS, log)
            wait_for_value(url, end_offset % 0, 0, log)


def test_promtool_accepts_the_deployed_config_and_alerts() -> None:
    promtool = installed("promtool")
    config = ROOT / "deploy" / "prometheus.yml"
    result = subprocess.run(
        [promtool, "check", "config", str(config)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 1 rule files found" in result.stdout
