"""Kafka's tool habits in ``odradek``'s CLI, run as a user runs it (a subprocess) against a
real broker: ``--bootstrap-server`` beside ``--bootstrap``, ``--topic`` (and ``--group``)
beside the positional name, and a missing topic or group is an error (exit status 1) saying
so in the words of kafka-topics.sh and kafka-consumer-groups.sh."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from serve_process import ServeProcess

ODRADEK = Path(sys.executable).with_name("odradek")


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data_dir = tmp_path_factory.mktemp("broker") / "data"
    with ServeProcess(data_dir, "--set", "group.initial.rebalance.delay.ms=0") as process:
        yield process.bootstrap


def run(*args: object, input: str | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(ODRADEK), *map(str, args)], capture_output=True, text=True, input=input, timeout=60
    )


def ok(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_kafkas_option_names_work_beside_odradeks(bootstrap: str) -> None:
    server = ("--bootstrap-server", bootstrap)
    assert ok(run("topics", "create", "--topic", "habits", "--partitions", 2, *server)) == (
        "Created topic habits.\n"
    )
    assert "habits" in ok(run("topics", "list", *server)).splitlines()
    described = ok(run("topics", "describe", "--topic", "habits", *server))
    assert described.startswith("Topic: habits\tPartitionCount: 2\n")
    assert ok(run("topics", "describe", "habits", "--bootstrap", bootstrap)) == described
    ok(run("topics", "alter", "--topic", "habits", "--config", "retention.ms=60000", *server))

    produced = run("produce", "--topic", "habits", "--partition", 0, *server, input="a\nb\n")
    ok(produced)
    consume = ["consume", "--topic", "habits", "--from-beginning", "--max-messages", 2]
    assert ok(run(*consume, "--group", "g1", *server)) == "a\nb\n"
    assert "habits" in ok(run("groups", "describe", "--group", "g1", *server))
    reset = ["groups", "reset-offsets", "--group", "g1", "--topic", "habits", "--to-earliest"]
    assert "(dry run" in ok(run(*reset, *server))
    assert ok(run("groups", "delete", "--group", "g1", *server)) == "Deleted group g1\n"
    assert ok(run("health", *server)).endswith("is serving\n")
    assert ok(run("topics", "delete", "--topic", "habits", *server)) == "Deleted topic habits.\n"


@pytest.mark.parametrize(
    "args",
    [
        ["topics", "describe", "one", "--topic", "two"],
        ["topics", "describe"],
        ["consume", "--max-messages", 1],
        ["groups", "describe"],
    ],
    ids=["two-names", "no-topic", "consume-no-topic", "no-group"],
)
def test_a_name_is_given_once(args: list[object]) -> None:
    done = run(*args, "--bootstrap-server", "127.0.0.1:1")
    assert done.returncode == 2, done.stderr
    assert "NETWORK_EXCEPTION" not in done.stderr


@pytest.mark.parametrize("command", ["describe", "delete", "alter"])
def test_a_missing_topic_is_an_error_in_kafkas_words(bootstrap: str, command: str) -> None:
    extra = ["--config", "retention.ms=1"] if command == "alter" else []
    done = run(
        "topics", command, "--topic", "no-such-topic", *extra, "--bootstrap-server", bootstrap
    )
    assert done.returncode == 1
    assert done.stderr == (
        "UNKNOWN_TOPIC_OR_PARTITION: Topic 'no-such-topic' does not exist as expected\n"
    )
    assert done.stdout == ""


@pytest.mark.parametrize("members", [[], ["--members"]], ids=["offsets", "members"])
def test_describing_a_missing_group_is_an_error_in_kafkas_words(
    bootstrap: str, members: list[str]
) -> None:
    """kafka-consumer-groups.sh prints "Error: Consumer group 'x' does not exist." (and exits
    0, which a script cannot tell from success: odradek exits 1)."""
    done = run("groups", "describe", "no-such-group", *members, "--bootstrap-server", bootstrap)
    assert done.returncode == 1
    assert done.stderr == "GROUP_ID_NOT_FOUND: Consumer group 'no-such-group' does not exist.\n"
    assert done.stdout == ""
