"""``odradek transactions list|describe`` against ``odradek serve``, printing what
kafka-transactions.sh prints."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator

import pytest
from click.testing import CliRunner, Result
from kafka_reference import TOOL, UNRESOLVABLE, unavailable
from serve_process import ServeProcess

from odradek.cli.main import cli
from odradek.client import Admin, NewTopic, Producer


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with ServeProcess(tmp_path_factory.mktemp("broker") / "data") as process:
        admin = Admin(bootstrap_servers=process.bootstrap)
        try:
            admin.create_topics([NewTopic("orders", 2)])
        finally:
            admin.close()
        yield process.bootstrap


def transactions(bootstrap: str, *args: str) -> Result:
    return CliRunner().invoke(cli, ["transactions", *args, "--bootstrap-server", bootstrap])


def table(output: str) -> list[list[str]]:
    """Kafka's table: each cell padded and followed by a tab."""
    lines = output.splitlines()
    assert all(line.endswith("\t") for line in lines), output
    return [[cell.strip() for cell in line.split("\t")[:-1]] for line in lines]


@pytest.fixture
def producer(bootstrap: str, request: pytest.FixtureRequest) -> Iterator[Producer]:
    producer = Producer(
        bootstrap_servers=bootstrap, transactional_id=f"{request.node.name}-tx", linger_ms=1
    )
    try:
        producer.init_transactions()
        yield producer
    finally:
        producer.close()


def test_describe_shows_the_open_transaction_then_its_commit(
    bootstrap: str, producer: Producer
) -> None:
    transactional_id = producer.config.transactional_id
    producer.begin_transaction()
    producer.send("orders", b"a", partition=1)
    producer.send("orders", b"b", partition=0)
    producer.flush()
    result = transactions(bootstrap, "describe", "--transactional-id", transactional_id)
    assert result.exit_code == 0, result.output
    header, row = table(result.stdout)
    assert header == [
        "CoordinatorId",
        "TransactionalId",
        "ProducerId",
        "ProducerEpoch",
        "TransactionState",
        "TransactionTimeoutMs",
        "CurrentTransactionStartTimeMs",
        "TransactionDurationMs",
        "TopicPartitions",
    ]
    described = dict(zip(header, row, strict=True))
    manager = producer._producer._transactions
    assert described["TransactionalId"] == transactional_id
    assert described["ProducerId"] == str(manager.producer_id)
    assert described["ProducerEpoch"] == str(manager.producer_epoch)
    assert described["TransactionState"] == "Ongoing"
    assert described["TransactionTimeoutMs"] == "60000"
    assert int(described["CurrentTransactionStartTimeMs"]) > 0
    assert int(described["TransactionDurationMs"]) >= 0
    assert sorted(described["TopicPartitions"].split(",")) == ["orders-0", "orders-1"]
    producer.commit_transaction()
    result = transactions(bootstrap, "describe", "--transactional-id", transactional_id)
    described = dict(zip(*table(result.stdout), strict=True))
    assert described["TransactionState"] in ("PrepareCommit", "CompleteCommit")


def test_list_names_every_transactional_id(bootstrap: str, producer: Producer) -> None:
    transactional_id = producer.config.transactional_id
    result = transactions(bootstrap, "list")
    assert result.exit_code == 0, result.output
    header, *rows = table(result.stdout)
    assert header == ["TransactionalId", "Coordinator", "ProducerId", "TransactionState"]
    listed = {row[0]: row for row in rows}
    manager = producer._producer._transactions
    assert listed[transactional_id][2:] == [str(manager.producer_id), "Empty"]
    # Only transactions running longer than a minute: not one begun now.
    producer.begin_transaction()
    producer.send("orders", b"x", partition=0)
    producer.flush()
    result = transactions(bootstrap, "list")
    assert [row[3] for row in table(result.stdout) if row[0] == transactional_id] == ["Ongoing"]
    result = transactions(bootstrap, "list", "--duration-filter", "60000")
    assert result.exit_code == 0, result.output
    assert transactional_id not in result.stdout
    producer.abort_transaction()


def test_describing_an_unknown_transactional_id_fails(bootstrap: str) -> None:
    result = transactions(bootstrap, "describe", "--transactional-id", "nobody")
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr.startswith(
        "Failed to describe transaction state of transactional-id `nobody`: "
        "TRANSACTIONAL_ID_NOT_FOUND"
    ), result.stderr


def test_describe_needs_a_transactional_id(bootstrap: str) -> None:
    result = transactions(bootstrap, "describe")
    assert result.exit_code == 2
    assert "Missing option '--transactional-id'" in result.output


def _kafka_transactions(bootstrap: str, *args: str) -> tuple[int, str, str]:
    """Kafka 4.4's kafka-transactions.sh (TransactionsCommand) against the broker."""
    done = subprocess.run(
        [str(TOOL), "run", "org.apache.kafka.tools.TransactionsCommand"]
        + ["--bootstrap-server", bootstrap, *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    if done.returncode == UNRESOLVABLE:
        unavailable(done.stderr.strip())
    return done.returncode, done.stdout, done.stderr


@pytest.mark.reference_kafka
def test_odradek_transactions_prints_what_kafka_transactions_sh_prints(
    bootstrap: str, producer: Producer
) -> None:
    transactional_id = producer.config.transactional_id
    producer.begin_transaction()
    producer.send("orders", b"a", partition=1)
    producer.commit_transaction()
    code, kafka_out, kafka_err = _kafka_transactions(
        bootstrap, "describe", "--transactional-id", transactional_id
    )
    assert code == 0, kafka_err
    ours = transactions(bootstrap, "describe", "--transactional-id", transactional_id)
    kafka_rows = [r for r in table(kafka_out) if r]
    our_rows = table(ours.stdout)
    duration = kafka_rows[0].index("TransactionDurationMs")  # the time each looked
    for row in (*kafka_rows, *our_rows):
        del row[duration]
    assert our_rows == kafka_rows
    code, kafka_out, kafka_err = _kafka_transactions(bootstrap, "list")
    assert code == 0, kafka_err
    ours = transactions(bootstrap, "list")
    assert sorted(table(ours.stdout)[1:]) == sorted(table(kafka_out)[1:])
    assert table(ours.stdout)[0] == table(kafka_out)[0]
    # An id the coordinator does not know: both exit 1, saying so the same way.
    code, kafka_out, kafka_err = _kafka_transactions(
        bootstrap, "describe", "--transactional-id", "nobody"
    )
    ours = transactions(bootstrap, "describe", "--transactional-id", "nobody")
    assert (code, ours.exit_code) == (1, 1)
    prefix = "Failed to describe transaction state of transactional-id `nobody`: "
    assert prefix in kafka_err and ours.stderr.startswith(prefix), kafka_err


def test_describe_producers_shows_an_open_transactions_first_offset(
    bootstrap: str, producer: Producer
) -> None:
    manager = producer._producer._transactions
    producer.begin_transaction()
    producer.send("orders", b"a", partition=0)
    producer.flush()
    result = transactions(bootstrap, "describe-producers", "--topic", "orders", "--partition", "0")
    assert result.exit_code == 0, result.output
    header, *rows = table(result.stdout)
    assert header == [
        "ProducerId",
        "ProducerEpoch",
        "LatestCoordinatorEpoch",
        "LastSequence",
        "LastTimestamp",
        "CurrentTransactionStartOffset",
    ]
    ours = {row[0]: dict(zip(header, row, strict=True)) for row in rows}
    mine = ours[str(manager.producer_id)]
    assert mine["ProducerEpoch"] == str(manager.producer_epoch)
    assert mine["CurrentTransactionStartOffset"] != "None"
    first_offset = int(mine["CurrentTransactionStartOffset"])
    assert int(mine["LastTimestamp"]) > 0
    producer.commit_transaction()
    result = transactions(bootstrap, "describe-producers", "--topic", "orders", "--partition", "0")
    rows = table(result.stdout)[1:]
    mine = {row[0]: row for row in rows}[str(manager.producer_id)]
    assert mine[5] == "None" and first_offset >= 0


def test_describe_producers_of_a_missing_partition_fails(bootstrap: str) -> None:
    result = transactions(bootstrap, "describe-producers", "--topic", "nowhere", "--partition", "0")
    assert result.exit_code == 1
    assert "UNKNOWN_TOPIC_OR_PARTITION" in result.stderr, result.stderr


@pytest.mark.reference_kafka
def test_odradek_describe_producers_prints_what_kafka_transactions_sh_prints(
    bootstrap: str, producer: Producer
) -> None:
    producer.begin_transaction()
    producer.send("orders", b"a", partition=1)
    producer.flush()
    args = ("describe-producers", "--topic", "orders", "--partition", "1")
    code, kafka_out, kafka_err = _kafka_transactions(bootstrap, *args)
    assert code == 0, kafka_err
    ours = transactions(bootstrap, *args)
    assert [r for r in table(kafka_out) if r] == table(ours.stdout)
    producer.abort_transaction()
    code, kafka_out, kafka_err = _kafka_transactions(
        bootstrap, "describe-producers", "--topic", "nowhere", "--partition", "0"
    )
    ours = transactions(bootstrap, "describe-producers", "--topic", "nowhere", "--partition", "0")
    assert (code, ours.exit_code) == (1, 1), kafka_err
