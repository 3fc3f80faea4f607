"""Until odradek has a transaction coordinator, a transactional client fails fast and says why.

FindCoordinator for a transactional id used to answer the retriable COORDINATOR_NOT_AVAILABLE,
so the Java client, librdkafka and Kafka Streams with exactly_once_v2 retried until their own
timeouts (20 s to forever) with nothing logged. The broker now answers UNSUPPORTED_VERSION
(non-retriable) with a message saying transactions are not served: the Java client and
kafka-python give up at once with it. librdkafka treats every FindCoordinator error but
TRANSACTIONAL_ID_AUTHORIZATION_FAILED as passing and retries until init_transactions' timeout;
answering that code would tell its users a lie about authorization, so it is not used.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Iterator

import pytest
from kafka import KafkaProducer
from kafka.errors import KafkaError
from kafka_reference import HARNESS_MAIN, harness_classpath
from server_helpers import RunningBroker, running_broker

NOT_SERVED = "transactions are not supported by this broker"


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    with running_broker(tmp_path_factory.mktemp("transactions-refused")) as running:
        yield running


def test_kafka_python_init_transactions_fails_at_once_with_the_reason(
    broker: RunningBroker,
) -> None:
    producer = KafkaProducer(
        bootstrap_servers=broker.bootstrap, transactional_id="refused-kafka-python"
    )
    try:
        started = time.monotonic()
        with pytest.raises(KafkaError) as raised:
            producer.init_transactions()
        elapsed = time.monotonic() - started
    finally:
        producer.close(timeout=5)
    assert "UnsupportedVersionError" in str(raised.value), raised.value
    assert elapsed < 10, f"init_transactions took {elapsed:.1f} s to fail"


@pytest.mark.reference_kafka
def test_the_java_transactional_producer_fails_at_once_with_the_reason(
    broker: RunningBroker,
) -> None:
    classpath = harness_classpath()
    started = time.monotonic()
    done = subprocess.run(
        [
            "java",
            "-Xmx256m",
            "-cp",
            classpath,
            HARNESS_MAIN,
            "produce",
            "--bootstrap",
            broker.bootstrap,
            "--topic",
            "refused-java",
            "--property",
            "transactional.id=refused-java",
            "--property",
            "max.block.ms=60000",
        ],
        input="begin\ncommit\n",
        capture_output=True,
        text=True,
        timeout=120,
    )
    elapsed = time.monotonic() - started
    assert done.returncode != 0, done.stdout
    assert NOT_SERVED in done.stderr, done.stderr[-3000:]
    assert elapsed < 30, f"initTransactions took {elapsed:.1f} s to fail (max.block.ms is 60 s)"
