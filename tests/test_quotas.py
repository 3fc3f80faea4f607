"""Client quotas as Kafka's: the sampled-window rate, the precedence of user and client-id
entities, their persistence, the throttle time in responses and the muted connection, and
real clients held to their byte rates while other clients on the broker are not."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import confluent_kafka
import confluent_kafka.admin
import pytest
from server_helpers import RunningBroker, batch, running_broker

from odradek.protocol.produce import ProduceRequest
from odradek.protocol.values.produce import ProducePartitionData
from odradek.server.quota.client_quota_entity import (
    CONSUMER_BYTE_RATE,
    PRODUCER_BYTE_RATE,
    REQUEST_PERCENTAGE,
    ClientQuotaEntity,
)
from odradek.server.quota.client_quota_manager import ClientQuotaManager
from odradek.server.quota.client_quota_store import QUOTAS_FILE, ClientQuotaStore
from odradek.server.quota.sampled_rate import SampledRate
from odradek.topic_partition import TopicPartition

CLIENT_PROCESS = Path(__file__).parent / "quota_client_process.py"
QUOTA = 256 * 1024
TOLERANCE = 0.10
TEN_SECOND_WINDOW = {"quota.window.num": "10", "quota.window.size.seconds": "1"}
"""Rates measured over 10 s, as the tests measure them (Kafka's default is 11 samples)."""


def test_sampled_rate_measures_over_its_windows() -> None:
    rate = SampledRate(samples=11, window_ms=1000, now_ms=0)
    rate.record(10_000, 0)
    # A first burst is measured against all but one of the windows: 10 s, not its instant.
    assert rate.measure(500) == pytest.approx(10_000 / 10.5)
    for second in range(1, 20):
        rate.record(1000, second * 1000)
    # Samples older than 11 windows are forgotten: 11 samples of 1000 over ~10 s.
    assert rate.measure(19_500) == pytest.approx(11 * 1000 / 10.5)
    assert rate.measure(60_000) == 0


def test_throttle_time_is_kafkas() -> None:
    manager = ClientQuotaManager(PRODUCER_BYTE_RATE, 11, 1.0)
    manager.update({ClientQuotaEntity.of(client_id="c"): 1000.0})
    assert manager.record("u", "c", 5000, 0) == 0  # 5000 over 10 s: within 1000/s
    throttle = manager.record("u", "c", 10_000, 100)  # 15000 / 10.1 s
    assert throttle == round((15_000 / 10.1 - 1000) / 1000 * 10_100)
    assert manager.record("u", "other", 1_000_000, 100) == 0  # no quota applies


def test_quota_precedence_is_kafkas() -> None:
    """user+client, user+default client, user, default user+client, default user+default
    client, default user, client, default client: the first configured wins."""
    entities = [
        ClientQuotaEntity.of(user="alice", client_id="app"),
        ClientQuotaEntity.of(user="alice", client_id=None),
        ClientQuotaEntity.of(user="alice"),
        ClientQuotaEntity.of(user=None, client_id="app"),
        ClientQuotaEntity.of(user=None, client_id=None),
        ClientQuotaEntity.of(user=None),
        ClientQuotaEntity.of(client_id="app"),
        ClientQuotaEntity.of(client_id=None),
    ]
    manager = ClientQuotaManager(CONSUMER_BYTE_RATE, 11, 1.0)
    for configured in range(len(entities)):
        quotas = {entity: float(i + 1) for i, entity in enumerate(entities) if i >= configured}
        manager.update(quotas)
        assert manager.quota_for("alice", "app") == configured + 1
    manager.update({ClientQuotaEntity.of(user="alice"): 5.0})
    assert manager.quota_for("bob", "app") is None
    # A user's quota is shared by all its client ids; a default user's applies per user.
    manager.update(
        {ClientQuotaEntity.of(user="alice"): 1000.0, ClientQuotaEntity.of(user=None): 10.0}
    )
    manager.record("alice", "a", 8000, 0)
    assert manager.record("alice", "b", 8000, 0) > 0
    assert manager.record("bob", "a", 50, 0) == 0
    assert manager.record("carol", "a", 50, 0) == 0


def test_quotas_persist_atomically(tmp_path: Path) -> None:
    store = ClientQuotaStore(tmp_path)
    alice = ClientQuotaEntity.of(user="alice")
    default_client = ClientQuotaEntity.of(client_id=None)
    store.alter([(alice, {PRODUCER_BYTE_RATE: 1024, REQUEST_PERCENTAGE: 50})])
    store.alter([(default_client, {CONSUMER_BYTE_RATE: 2048})])
    (tmp_path / (QUOTAS_FILE + ".tmp")).write_text("torn")  # a crash's leftover is ignored
    reread = ClientQuotaStore(tmp_path).quotas()
    assert reread == {
        alice: {PRODUCER_BYTE_RATE: 1024.0, REQUEST_PERCENTAGE: 50.0},
        default_client: {CONSUMER_BYTE_RATE: 2048.0},
    }
    with pytest.raises(ValueError, match="positive"):
        store.alter(
            [(alice, {PRODUCER_BYTE_RATE: None}), (default_client, {CONSUMER_BYTE_RATE: -1})]
        )
    with pytest.raises(ValueError, match="unknown quota"):
        store.alter([(alice, {"producer_rate": 1})])
    assert ClientQuotaStore(tmp_path).quotas() == reread  # nothing of a refused change
    store.alter([(alice, {PRODUCER_BYTE_RATE: None, REQUEST_PERCENTAGE: None})])
    assert alice not in ClientQuotaStore(tmp_path).quotas()
    (tmp_path / QUOTAS_FILE).write_text("{not json")
    with pytest.raises(ValueError, match=QUOTAS_FILE):
        ClientQuotaStore(tmp_path).quotas()


def test_throttled_response_then_muted_connection(tmp_path: Path) -> None:
    """KIP-219: the response carries the throttle time at once; the connection then reads
    nothing until it has passed. A client without a quota is answered as before."""
    ClientQuotaStore(tmp_path / "data").alter(
        [(ClientQuotaEntity.of(client_id="tiny"), {PRODUCER_BYTE_RATE: 1000})]
    )
    with running_broker(tmp_path) as broker:
        records = batch(11, value_size=1000)  # a little over 10 s of quota
        request = ProduceRequest((ProducePartitionData("t", 0, records),))
        with broker.connect() as free:
            assert free.call(request).throttle_time_ms == 0
        with broker.connect() as client:
            client.client_id = "tiny"
            response = client.call(request)
            expected = round((len(records) / 10.0 - 1000) / 1000 * 10_000)
            assert response.throttle_time_ms == pytest.approx(expected, rel=0.05)
            started = time.monotonic()
            client.call(ProduceRequest((ProducePartitionData("t", 0, batch(1)),)))
            waited_ms = (time.monotonic() - started) * 1000
            assert waited_ms >= 0.9 * response.throttle_time_ms
        metrics = broker.metrics()
        labels = 'client_id="tiny",quota_type="Produce",user=""'
        assert metrics[f"odradek_quota_throttled_requests_total{{{labels}}}"] >= 1
        assert metrics[f"odradek_quota_limit{{{labels}}}"] == 1000


def _spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, str(CLIENT_PROCESS), *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def _log_size(broker: RunningBroker, topic: str) -> int:
    try:
        return broker.broker.log_manager.get_log(TopicPartition(topic, 0)).size_in_bytes
    except Exception:
        return 0


def _create(broker: RunningBroker, *topics: str) -> None:
    admin = confluent_kafka.admin.AdminClient({"bootstrap.servers": broker.bootstrap})
    for future in admin.create_topics(
        [confluent_kafka.admin.NewTopic(t, 1, 1) for t in topics]
    ).values():
        future.result(timeout=30)


@pytest.mark.slow
def test_a_quota_limited_producer_is_held_to_its_rate(
    tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    ClientQuotaStore(tmp_path / "data").alter(
        [(ClientQuotaEntity.of(client_id="slow"), {PRODUCER_BYTE_RATE: QUOTA})]
    )
    with running_broker(tmp_path, TEN_SECOND_WINDOW) as broker:
        _create(broker, "slow-t", "fast-t")
        seconds = 14
        slow = _spawn("produce", broker.bootstrap, "slow-t", "slow", str(seconds))
        fast = _spawn("produce", broker.bootstrap, "fast-t", "fast", str(seconds))
        try:
            # Both topics' sizes every tenth of a second, with the time each was taken: on a
            # busy machine this thread can miss turns, so a sample's index is not its time.
            samples: list[tuple[float, int, int]] = []
            started = time.monotonic()
            while time.monotonic() - started < seconds - 1:
                time.sleep(0.1 - (time.monotonic() - started) % 0.1)
                samples.append(
                    (time.monotonic(), _log_size(broker, "slow-t"), _log_size(broker, "fast-t"))
                )
        finally:
            for process in (slow, fast):
                process.wait(timeout=60)
        # The first 10 s of the slow producer's traffic (its topic was empty before): up to
        # the last sample taken within 10 s of the first that saw any. A client that sends all
        # it may at once gets a window's worth at a time, then waits until samples expire, as
        # with Kafka's measure.
        first = next(i for i, (_, size, _) in enumerate(samples) if size)
        first_at = samples[first][0]
        last = max(i for i, (at, _, _) in enumerate(samples) if at - first_at <= 10.0)
        window = samples[last][1]
        timeline = [(round(at - first_at, 1), round(size / QUOTA, 2)) for at, size, _ in samples]
        assert abs(window / 10 / QUOTA - 1) <= TOLERANCE, timeline[first::10]
        fast_rate = (samples[last][2] - samples[first][2]) / (samples[last][0] - first_at)
        record_property("slow_rate_over_quota", window / 10 / QUOTA)
        record_property("fast_rate_over_quota", fast_rate / QUOTA)
        assert fast_rate >= 4 * QUOTA, (fast_rate, timeline[first::10])
        metrics = broker.metrics()
        assert not any('client_id="fast"' in name for name in metrics)  # never throttled


@pytest.mark.slow
def test_a_quota_limited_consumer_is_held_to_its_rate(
    tmp_path: Path, record_property: Callable[[str, object], None]
) -> None:
    ClientQuotaStore(tmp_path / "data").alter(
        [(ClientQuotaEntity.of(client_id="slowc"), {CONSUMER_BYTE_RATE: QUOTA})]
    )
    with running_broker(tmp_path, TEN_SECOND_WINDOW) as broker:
        _create(broker, "data")
        # Batches of 16 KiB: a fetch returns at least one whole batch, and batches far larger
        # than a quota window's worth would be answered only when a whole window is free.
        producer = confluent_kafka.Producer(
            {"bootstrap.servers": broker.bootstrap, "batch.size": 16384, "linger.ms": 5}
        )
        for _ in range(16_000):  # 16 MB: more than either consumer reads in its time
            producer.produce("data", b"y" * 1000)
            producer.poll(0)
        producer.flush(60)
        seconds = 12
        slow = _spawn("consume", broker.bootstrap, "data", "slowc", str(seconds))
        fast = _spawn("consume", broker.bootstrap, "data", "fastc", str(seconds))
        slow_timeline = json.loads(slow.communicate(timeout=120)[0])
        fast_timeline = json.loads(fast.communicate(timeout=120)[0])
    # A greedy client reads a quota window's worth at once, is throttled until the sample
    # holding that burst expires (10 samples of 1 s), then bursts again: its rate is what it
    # read before its second burst over the time that took (10 s when the second burst came
    # later than the first 10 s).
    seconds_held = 10.0
    for tenth in range(50, min(len(slow_timeline), 101)):
        if slow_timeline[tenth] - slow_timeline[tenth - 1] > QUOTA // 2:
            seconds_held = tenth / 10
            break
    window = slow_timeline[round(seconds_held * 10) - 1] * 10 / seconds_held
    record_property("slow_rate_over_quota", window / 10 / QUOTA)
    # The unlimited consumer read everything there was at its own pace.
    fast_seconds = (fast_timeline.index(fast_timeline[-1]) + 1) / 10
    fast_rate = fast_timeline[-1] / fast_seconds
    record_property("fast_rate_over_quota", fast_rate / QUOTA)
    assert abs(window / 10 / QUOTA - 1) <= TOLERANCE, slow_timeline[::10]
    assert fast_rate >= 4 * QUOTA, (fast_timeline[::10], slow_timeline[::10])


@pytest.mark.reference_kafka
@pytest.mark.slow
def test_kafka_configs_alters_and_describes_client_quotas(tmp_path: Path) -> None:
    """Kafka's own kafka-configs tool (ConfigCommand) against odradek."""
    from kafka_reference import kafka_classpath, run_java

    classpath = kafka_classpath()

    def configs(*args: str) -> str:
        done = run_java(classpath, "org.apache.kafka.tools.ConfigCommand", args)
        assert done.returncode == 0, done.stdout + done.stderr
        return done.stdout

    with running_broker(tmp_path) as broker:
        bootstrap = ["--bootstrap-server", broker.bootstrap]
        entity = ["--entity-type", "users", "--entity-name", "alice",
                  "--entity-type", "clients", "--entity-name", "app"]  # fmt: skip
        configs(*bootstrap, "--alter", *entity,
                "--add-config", "producer_byte_rate=1024,consumer_byte_rate=2048")  # fmt: skip
        described = configs(*bootstrap, "--describe", *entity)
        assert "producer_byte_rate=1024" in described and "consumer_byte_rate=2048" in described
        quotas = ClientQuotaStore(broker.data_dir).quotas()
        assert quotas[ClientQuotaEntity.of(user="alice", client_id="app")] == {
            PRODUCER_BYTE_RATE: 1024.0,
            CONSUMER_BYTE_RATE: 2048.0,
        }
        assert broker.broker.quotas.fetch.quota_for("alice", "app") == 2048.0
        configs(*bootstrap, "--alter", *entity, "--delete-config", "producer_byte_rate",
                "--add-config", "request_percentage=50")  # fmt: skip
        assert broker.broker.quotas.produce.quota_for("alice", "app") is None
        assert broker.broker.quotas.request.quota_for("alice", "app") == 50.0


def test_cli_alters_quotas_a_running_broker_follows(tmp_path: Path) -> None:
    from click.testing import CliRunner

    from odradek.cli.main import cli

    runner = CliRunner()
    with running_broker(tmp_path) as broker:
        data_dir = str(broker.data_dir)
        done = runner.invoke(cli, ["quotas", "alter", "--data-dir", data_dir,
                                   "--entity-type", "users", "--entity-default",
                                   "--add-config", "producer_byte_rate=4096"])  # fmt: skip
        assert done.exit_code == 0, done.output
        deadline = time.monotonic() + 30
        quotas = broker.broker.quotas
        while quotas.produce.quota_for("ANONYMOUS", "x") is None and time.monotonic() < deadline:
            time.sleep(0.1)
        assert quotas.enabled and quotas.produce.quota_for("ANONYMOUS", "x") == 4096
        done = runner.invoke(cli, ["quotas", "describe", "--data-dir", data_dir,
                                   "--entity-type", "users"])  # fmt: skip
        assert "user-principal the default are producer_byte_rate=4096.0" in done.output
        refused = runner.invoke(cli, ["quotas", "alter", "--data-dir", data_dir,
                                      "--entity-type", "clients", "--entity-name", "a",
                                      "--add-config", "bytes=1"])  # fmt: skip
        assert refused.exit_code != 0 and "producer_byte_rate" in refused.output
        done = runner.invoke(cli, ["quotas", "alter", "--data-dir", data_dir,
                                   "--entity-type", "users", "--entity-default",
                                   "--delete-config", "producer_byte_rate"])  # fmt: skip
        assert done.exit_code == 0, done.output
        deadline = time.monotonic() + 30
        while quotas.enabled and time.monotonic() < deadline:
            time.sleep(0.1)
        assert not quotas.enabled  # none left: the request paths skip quotas again


def test_msgpack_describes_and_alters_client_quotas(tmp_path: Path) -> None:
    from odradek.protocol.client_quotas import (
        AlterClientQuotasEntry,
        AlterClientQuotasRequest,
        DescribeClientQuotasRequest,
        QuotaEntityPart,
        QuotaFilterComponent,
        QuotaOp,
    )

    alice_app = (QuotaEntityPart("client-id", "app"), QuotaEntityPart("user", "alice"))
    default_client = (QuotaEntityPart("client-id", None),)
    with running_broker(tmp_path) as broker, broker.connect() as client:
        altered = client.call(
            AlterClientQuotasRequest(
                (
                    AlterClientQuotasEntry(alice_app, (QuotaOp(PRODUCER_BYTE_RATE, 2048),)),
                    AlterClientQuotasEntry(default_client, (QuotaOp(REQUEST_PERCENTAGE, 25.5),)),
                    AlterClientQuotasEntry(default_client, (QuotaOp("bogus", 1),)),
                    AlterClientQuotasEntry((QuotaEntityPart("group", "g"),), ()),
                )
            )
        )
        assert [e.error for e in altered.entries] == [0, 0, 42, 42]
        assert "bogus" in altered.entries[2].message
        assert broker.broker.quotas.produce.quota_for("alice", "app") == 2048
        everything = client.call(DescribeClientQuotasRequest())
        assert {e.entity: {v.key: v.value for v in e.values} for e in everything.entries} == {
            alice_app: {PRODUCER_BYTE_RATE: 2048.0},
            default_client: {REQUEST_PERCENTAGE: 25.5},
        }
        defaults = client.call(
            DescribeClientQuotasRequest((QuotaFilterComponent("client-id", 1),), strict=True)
        )
        assert [e.entity for e in defaults.entries] == [default_client]
        of_alice = client.call(
            DescribeClientQuotasRequest((QuotaFilterComponent("user", 0, "alice"),))
        )
        assert [e.entity for e in of_alice.entries] == [alice_app]
        strict_alice = client.call(
            DescribeClientQuotasRequest((QuotaFilterComponent("user", 0, "alice"),), strict=True)
        )
        assert strict_alice.entries == ()
        removed = client.call(
            AlterClientQuotasRequest(
                (AlterClientQuotasEntry(alice_app, (QuotaOp(PRODUCER_BYTE_RATE, remove=True),)),)
            )
        )
        assert removed.entries[0].error == 0
        assert broker.broker.quotas.produce.quota_for("alice", "app") is None


def test_quota_apis_need_cluster_acls(tmp_path: Path) -> None:
    from odradek.protocol.client_quotas import (
        AlterClientQuotasEntry,
        AlterClientQuotasRequest,
        DescribeClientQuotasRequest,
        QuotaEntityPart,
        QuotaOp,
    )

    settings = {"authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer"}
    with running_broker(tmp_path, settings) as broker, broker.connect() as client:
        request = DescribeClientQuotasRequest()
        client.send(request)
        header, _ = client.read_response(request)
        assert header.error == 31  # CLUSTER_AUTHORIZATION_FAILED
        altered = client.call(
            AlterClientQuotasRequest(
                (
                    AlterClientQuotasEntry(
                        (QuotaEntityPart("user", None),), (QuotaOp(PRODUCER_BYTE_RATE, 1),)
                    ),
                )
            )
        )
        assert altered.entries[0].error == 31
        assert not broker.broker.quotas.enabled


def test_request_percentage_throttles_a_busy_client(tmp_path: Path) -> None:
    from odradek.protocol.metadata import MetadataRequest

    ClientQuotaStore(tmp_path / "data").alter(
        [(ClientQuotaEntity.of(client_id="busy"), {REQUEST_PERCENTAGE: 0.001})]
    )
    with running_broker(tmp_path) as broker, broker.connect() as client:
        client.client_id = "busy"
        started = time.monotonic()
        while time.monotonic() - started < 10:
            client.call(MetadataRequest(None))
            labels = 'client_id="busy",quota_type="Request",user=""'
            if broker.metrics().get(f"odradek_quota_throttled_requests_total{{{labels}}}"):
                break
        else:
            raise AssertionError("a client over request_percentage was never throttled")
        assert broker.broker.quotas.request.quota_for("ANONYMOUS", "other") is None
