"""tools/kafka-reference/bin: Apache Kafka's own command-line tools under their usual names
(``kafka-topics.sh`` ...), run against ``odradek serve`` as a Kafka user would run them."""

from __future__ import annotations

import os
import subprocess
import zipfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka_reference import kafka_classpath, unavailable
from serve_process import ServeProcess

pytestmark = pytest.mark.reference_kafka

BIN = Path(__file__).parents[1] / "tools" / "kafka-reference" / "bin"
TOOLS = (
    "topics",
    "console-producer",
    "console-consumer",
    "consumer-groups",
    "configs",
    "acls",
    "producer-perf-test",
    "consumer-perf-test",
    "log-dirs",
    "transactions",
    "dump-log",
    "get-offsets",
    "delete-records",
)


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    kafka_classpath()  # resolved once here (or skipped, or failed in CI)
    data_dir = tmp_path_factory.mktemp("broker") / "data"
    with ServeProcess(data_dir, "--set", "group.initial.rebalance.delay.ms=0") as process:
        yield process.bootstrap


def kafka(tool: str, *args: object, input: str | None = None) -> str:
    """Run ``bin/kafka-<tool>.sh ARGS``; its stdout, after asserting it succeeded."""
    try:
        done = subprocess.run(
            [str(BIN / f"kafka-{tool}.sh"), *map(str, args)],
            capture_output=True,
            text=True,
            input=input,
            timeout=180,
        )
    except FileNotFoundError as error:  # no sh or java on PATH
        unavailable(str(error))
    assert done.returncode == 0, f"kafka-{tool}.sh {args} failed:\n{done.stderr}"
    return done.stdout


def test_every_tool_runs_a_main_class_kafka_has() -> None:
    classes = set()
    for entry in kafka_classpath().split(os.pathsep):  # jars, or folders of them (lib/*)
        jars = Path(entry[:-1]).glob("*.jar") if entry.endswith("*") else [Path(entry)]
        for jar in jars:
            with zipfile.ZipFile(jar) as archive:
                classes.update(name for name in archive.namelist() if name.endswith(".class"))
    script = (BIN / "kafka-tool").read_text()
    for tool in TOOLS:
        link = BIN / f"kafka-{tool}.sh"
        assert link.is_symlink() and os.readlink(link) == "kafka-tool", link
        (line,) = [line for line in script.splitlines() if f"kafka-{tool}.sh)" in line]
        main_class = line.split("class=")[1].split()[0]
        assert main_class.replace(".", "/") + ".class" in classes, (tool, main_class)


def test_topics_producer_consumer_groups_and_offsets(bootstrap: str) -> None:
    server = ("--bootstrap-server", bootstrap)
    kafka("topics", *server, "--create", "--topic", "wrapped", "--partitions", 2)
    assert "wrapped" in kafka("topics", *server, "--list").split()
    assert "PartitionCount: 2" in kafka("topics", *server, "--describe", "--topic", "wrapped")
    lines = [f"k{n}:v{n}" for n in range(6)]
    kafka(
        "console-producer",
        *server,
        "--topic",
        "wrapped",
        "--reader-property",
        "parse.key=true",
        "--reader-property",
        "key.separator=:",
        input="\n".join(lines) + "\n",
    )
    consumed = kafka(
        "console-consumer",
        *server,
        "--topic",
        "wrapped",
        "--group",
        "wrapped-group",
        "--from-beginning",
        "--max-messages",
        6,
        "--timeout-ms",
        30000,
    )
    assert sorted(consumed.split()) == [f"v{n}" for n in range(6)]
    described = kafka("consumer-groups", *server, "--describe", "--group", "wrapped-group")
    assert "wrapped-group" in described and "wrapped" in described
    offsets = kafka("get-offsets", *server, "--topic", "wrapped")  # wrapped:P:END lines
    assert sum(int(line.rsplit(":", 1)[1]) for line in offsets.split()) == 6, offsets
