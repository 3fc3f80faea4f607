"""``odradek users`` and ``odradek acls``: they edit the files a running broker reads, and the
broker follows at its next check."""

from __future__ import annotations

import json
import time
from pathlib import Path

import confluent_kafka
import confluent_kafka.admin as kadmin
import pytest
from click.testing import CliRunner
from security_helpers import ADMIN, ADMIN_PASSWORD, confluent_config, secure_broker

from odradek.cli.main import cli

AUTHORIZER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "super.users": f"User:{ADMIN}",
}


def _run(*args: str, password: str | None = None) -> str:
    env = {"ODRADEK_USER_PASSWORD": password} if password else {}
    result = CliRunner().invoke(cli, list(args), env=env, catch_exceptions=False)
    assert result.exit_code == 0, result.output
    return result.output


def test_users_and_acls_made_offline_take_effect_on_a_running_broker(tmp_path: Path) -> None:
    with secure_broker(tmp_path, AUTHORIZER) as (broker, certs):
        data = str(broker.data_dir)
        admin_config = confluent_config(
            broker, "SASL_SSL", certs, "SCRAM-SHA-512", ADMIN, ADMIN_PASSWORD
        )
        admin = kadmin.AdminClient(admin_config)
        admin.create_topics([kadmin.NewTopic("dave-orders", 1, 1)])["dave-orders"].result(30)

        _run("users", "add", "dave", "--data-dir", data, "--iterations", "8192", password="pw-d")
        listed = _run("users", "list", "--data-dir", data)
        assert "dave: SCRAM-SHA-256 (8192 iterations), SCRAM-SHA-512 (8192 iterations)" in listed
        stored = (broker.data_dir / "__scram_credentials.json").read_text()
        assert "pw-d" not in stored and json.loads(stored)["users"]["dave"]

        dave = confluent_config(broker, "SASL_SSL", certs, "SCRAM-SHA-256", "dave", "pw-d")
        assert "dave-orders" not in kadmin.AdminClient(dave).list_topics(timeout=10).topics

        added = _run(
            "acls", "add", "--data-dir", data, "--allow-principal", "User:dave",
            "--producer", "--topic", "dave-", "--resource-pattern-type", "prefixed",
        )  # fmt: skip
        assert "operation=Write" in added and "Topic:PREFIXED:dave-" in added
        assert "dave-orders" in kadmin.AdminClient(dave).list_topics(timeout=10).topics
        producer = confluent_kafka.Producer({**dave, "enable.idempotence": False})
        producer.produce("dave-orders", b"x")
        assert producer.flush(30) == 0
        listed = _run("acls", "list", "--data-dir", data, "--topic", "dave-orders",
                      "--resource-pattern-type", "match")  # fmt: skip
        assert listed.count("User:dave") == 3

        removed = _run(
            "acls", "remove", "--data-dir", data, "--allow-principal", "User:dave",
            "--topic", "dave-", "--resource-pattern-type", "prefixed",
        )  # fmt: skip
        assert removed.count("removed") == 3
        assert "dave-orders" not in kadmin.AdminClient(dave).list_topics(timeout=10).topics

        _run("users", "delete", "dave", "--data-dir", data)
        assert "dave" not in _run("users", "list", "--data-dir", data)
        errors: list[str] = []
        gone = kadmin.AdminClient({**dave, "error_cb": lambda e: errors.append(str(e))})
        deadline = time.monotonic() + 30  # from the first attempt, not after 5 s of retries
        while not any("Authentication failed" in e for e in errors):
            assert time.monotonic() < deadline, errors
            gone.poll(0.05)  # delivers the error events


def test_a_transactional_id_acl_made_offline_lets_a_transactional_producer_commit(
    tmp_path: Path,
) -> None:
    """``--transactional-id`` with ``--producer`` grants Write and Describe on the id, as
    kafka-acls.sh does: without it the producer's InitProducerId is refused with
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED, with it a transaction commits."""
    with secure_broker(tmp_path, AUTHORIZER) as (broker, certs):
        data = str(broker.data_dir)
        admin_config = confluent_config(
            broker, "SASL_SSL", certs, "SCRAM-SHA-512", ADMIN, ADMIN_PASSWORD
        )
        admin = kadmin.AdminClient(admin_config)
        admin.create_topics([kadmin.NewTopic("tina-orders", 1, 1)])["tina-orders"].result(30)
        _run("users", "add", "tina", "--data-dir", data, "--iterations", "4096", password="pw-t")
        tina = confluent_config(broker, "SASL_SSL", certs, "SCRAM-SHA-256", "tina", "pw-t")
        _run("acls", "add", "--data-dir", data, "--allow-principal", "User:tina",
             "--producer", "--topic", "tina-orders")  # fmt: skip

        refused = confluent_kafka.Producer({**tina, "transactional.id": "tina-tx"})
        with pytest.raises(confluent_kafka.KafkaException) as failure:
            refused.init_transactions(30)
        assert failure.value.args[0].code() == (
            confluent_kafka.KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        )

        added = _run("acls", "add", "--data-dir", data, "--allow-principal", "User:tina",
                     "--producer", "--transactional-id", "tina-tx")  # fmt: skip
        assert "operation=Write" in added and "operation=Describe" in added
        assert "TransactionalId:LITERAL:tina-tx" in added and "operation=Create" not in added
        listed = _run("acls", "list", "--data-dir", data, "--transactional-id", "tina-tx")
        assert listed.count("User:tina") == 2

        producer = confluent_kafka.Producer({**tina, "transactional.id": "tina-tx"})
        producer.init_transactions(30)
        producer.begin_transaction()
        producer.produce("tina-orders", b"paid")
        producer.commit_transaction(30)
