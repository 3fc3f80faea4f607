"""``odradek groups`` and ``odradek consume --group`` against a real broker process."""

from __future__ import annotations

import re
from collections.abc import Iterator

import pytest
from click.testing import CliRunner, Result
from serve_process import ServeProcess

from odradek.cli.main import cli
from odradek.client import Admin, Consumer, NewTopic, Producer
from odradek.topic_partition import TopicPartition

SETTINGS = (
    "--set",
    "group.initial.rebalance.delay.ms=0",
    "--set",
    "offsets.topic.num.partitions=2",
)


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    data_dir = tmp_path_factory.mktemp("broker") / "data"
    with ServeProcess(data_dir, *SETTINGS) as process:
        with Admin(bootstrap_servers=process.bootstrap) as admin:
            admin.create_topics([NewTopic("orders", 2)])
        with Producer(bootstrap_servers=process.bootstrap, linger_ms=0) as producer:
            for index in range(10):
                producer.send("orders", f"o{index}".encode(), partition=index % 2)
            producer.flush()
        yield process.bootstrap


def odradek(bootstrap: str, *args: object) -> Result:
    return CliRunner().invoke(cli, [*map(str, args), "--bootstrap", bootstrap])


def ok(result: Result) -> str:
    assert result.exit_code == 0, result.output
    return result.stdout


def test_consume_with_a_group_commits_what_it_printed_and_resumes(bootstrap: str) -> None:
    first = ok(
        odradek(
            bootstrap,
            "consume",
            "orders",
            "--group",
            "cli",
            "--from-beginning",
            "--max-messages",
            "4",
            "--timeout-ms",
            "3000",
        )
    )
    assert len(first.splitlines()) == 4
    rest = ok(
        odradek(
            bootstrap,
            "consume",
            "orders",
            "--group",
            "cli",
            "--from-beginning",
            "--max-messages",
            "6",
            "--timeout-ms",
            "2000",
        )
    )
    assert sorted(first.splitlines() + rest.splitlines()) == sorted(f"o{i}" for i in range(10))


def test_list_describe_reset_and_delete(bootstrap: str) -> None:
    with Consumer(bootstrap_servers=bootstrap, group_id="app", enable_auto_commit=False) as c:
        c.commit({TopicPartition("orders", 0): 2, TopicPartition("orders", 1): 5})
    assert "app" in ok(odradek(bootstrap, "groups", "list")).split()
    assert "app\tEmpty" in ok(odradek(bootstrap, "groups", "list", "--state", "empty"))
    described = ok(odradek(bootstrap, "groups", "describe", "app"))
    assert described.splitlines()[0] == "Group app is Empty with 0 members"
    rows = [line.split() for line in described.splitlines()[2:]]
    assert rows == [
        ["app", "orders", "0", "2", "5", "3", "-", "-", "-"],
        ["app", "orders", "1", "5", "5", "0", "-", "-", "-"],
    ]
    dry = ok(
        odradek(
            bootstrap, "groups", "reset-offsets", "app", "--topic", "orders", "--shift-by", "-3"
        )
    )
    assert re.search(r"app\s+orders\s+0\s+0\n", dry) and re.search(r"app\s+orders\s+1\s+2\n", dry)
    assert "dry run" in dry
    with Admin(bootstrap_servers=bootstrap) as admin:
        assert admin.list_consumer_group_offsets("app")[TopicPartition("orders", 1)] == 5
        ok(
            odradek(
                bootstrap,
                "groups",
                "reset-offsets",
                "app",
                "--topic",
                "orders:1",
                "--to-earliest",
                "--execute",
            )
        )
        assert admin.list_consumer_group_offsets("app") == {
            TopicPartition("orders", 0): 2,
            TopicPartition("orders", 1): 0,
        }
        ok(
            odradek(
                bootstrap,
                "groups",
                "reset-offsets",
                "app",
                "--all-topics",
                "--to-offset",
                "99",
                "--execute",
            )
        )  # kept within the log: 5
        assert set(admin.list_consumer_group_offsets("app").values()) == {5}
        ok(
            odradek(
                bootstrap,
                "groups",
                "reset-offsets",
                "app",
                "--all-topics",
                "--to-datetime",
                "2000-01-01T00:00:00Z",
                "--execute",
            )
        )
        assert set(admin.list_consumer_group_offsets("app").values()) == {0}
    assert ok(odradek(bootstrap, "groups", "delete", "app")) == "Deleted group app\n"
    assert "app" not in ok(odradek(bootstrap, "groups", "list")).split()
    missing = odradek(bootstrap, "groups", "delete", "app")
    assert missing.exit_code == 1 and "GROUP_ID_NOT_FOUND" in missing.output


def test_describe_shows_members_and_refuses_to_reset_an_active_group(bootstrap: str) -> None:
    with Consumer(
        bootstrap_servers=bootstrap,
        group_id="live",
        auto_offset_reset="earliest",
        client_id="worker",
    ) as consumer:
        consumer.subscribe(["orders"])
        while len(consumer.assignment()) < 2:
            consumer.poll(100)
        consumer.commit()
        described = ok(odradek(bootstrap, "groups", "describe", "live"))
        assert described.startswith("Group live is Stable with 1 members (protocol range)")
        assert len(re.findall(r"worker-\S+\s+/127.0.0.1\s+worker\n", described)) == 2
        members = ok(odradek(bootstrap, "groups", "describe", "live", "--members"))
        assert "orders-0,orders-1" in members
        refused = odradek(
            bootstrap,
            "groups",
            "reset-offsets",
            "live",
            "--all-topics",
            "--to-earliest",
            "--execute",
        )
        assert refused.exit_code == 1 and "NON_EMPTY_GROUP" in refused.output
