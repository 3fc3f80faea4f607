"""A consumer group grows from 1 to 3 members and shrinks back, once per client: librdkafka
(confluent-kafka), kafka-python, aiokafka, kcat's balanced consumer, Kafka's Java consumer and
odradek's own consumer, against one broker in the test process. The scenario and what it checks
are group_scenario's."""

from __future__ import annotations

import shutil
from collections.abc import Iterator

import pytest
from group_scenario import (
    AiokafkaMember,
    ConfluentMember,
    JavaMember,
    KafkaPythonMember,
    KcatMember,
    OdradekMember,
    Ownership,
    grow_and_shrink,
)
from server_helpers import RunningBroker, running_broker

GROUP_SETTINGS = {"group.initial.rebalance.delay.ms": "0", "offsets.topic.num.partitions": "3"}


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RunningBroker]:
    with running_broker(tmp_path_factory.mktemp("grow-shrink"), GROUP_SETTINGS) as running:
        yield running


def test_a_librdkafka_group_grows_and_shrinks(broker: RunningBroker) -> None:
    def member(name: str, topic: str, group: str, ownership: Ownership) -> ConfluentMember:
        return ConfluentMember(name, broker, topic, group, ownership)

    grow_and_shrink(broker, "librdkafka", member)


def test_a_kafka_python_group_grows_and_shrinks(broker: RunningBroker) -> None:
    def member(name: str, topic: str, group: str, ownership: Ownership) -> KafkaPythonMember:
        return KafkaPythonMember(name, broker, topic, group, ownership)

    grow_and_shrink(broker, "kafka-python", member)


@pytest.mark.slow
def test_an_aiokafka_group_grows_and_shrinks(broker: RunningBroker) -> None:
    def member(name: str, topic: str, group: str, ownership: Ownership) -> AiokafkaMember:
        return AiokafkaMember(name, broker, topic, group, ownership)

    grow_and_shrink(broker, "aiokafka", member)


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("kcat") is None, reason="kcat is not installed")
def test_a_kcat_group_grows_and_shrinks(broker: RunningBroker) -> None:
    def member(name: str, topic: str, group: str, ownership: Ownership) -> KcatMember:
        return KcatMember(name, broker, topic, group, ownership)

    grow_and_shrink(broker, "kcat", member)


@pytest.mark.slow
def test_an_odradek_consumer_group_grows_and_shrinks(broker: RunningBroker) -> None:
    def member(name: str, topic: str, group: str, ownership: Ownership) -> OdradekMember:
        return OdradekMember(name, broker, topic, group, ownership)

    grow_and_shrink(broker, "odradek", member)


@pytest.mark.slow
@pytest.mark.reference_kafka
def test_a_java_consumer_group_grows_and_shrinks(broker: RunningBroker) -> None:
    from kafka_reference import harness_classpath

    classpath = harness_classpath()

    def member(name: str, topic: str, group: str, ownership: Ownership) -> JavaMember:
        return JavaMember(name, broker, topic, group, ownership, classpath)

    grow_and_shrink(broker, "java", member)
