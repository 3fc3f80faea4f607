"""InitProducerId on both protocols, ids that never repeat across restarts, the epoch bump
(KIP-360), fencing and gaps answered on the wire, and OffsetForLeaderEpoch."""

from __future__ import annotations

import asyncio
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from server_helpers import RunningBroker, running_broker

from odradek.errors import (
    InvalidProducerEpochError,
    InvalidRequestError,
    KafkaStorageError,
    OutOfOrderSequenceNumberError,
    UnknownTopicOrPartitionError,
    UnsupportedVersionError,
)
from odradek.protocol.header import RequestHeader
from odradek.protocol.init_producer_id import InitProducerIdRequest
from odradek.protocol.kafka.message_codec import decode, encode_parts, request_spec, response_spec
from odradek.protocol.produce import ProduceRequest
from odradek.protocol.topics import CreatableTopic, CreateTopicsRequest
from odradek.protocol.values.produce import ProducePartitionData
from odradek.record.record_batch_builder import build_batch
from odradek.server.producer_id_manager import PRODUCER_ID_BLOCK_FILE, ProducerIdManager
from odradek.server.request_context import RequestContext


@pytest.fixture(scope="module")
def broker(tmp_path_factory: pytest.TempPathFactory) -> RunningBroker:
    with running_broker(tmp_path_factory.mktemp("producer-ids")) as running:
        yield running


def init(broker: RunningBroker, **fields: object):
    with broker.connect() as client:
        return client.call(InitProducerIdRequest(**fields))


def refusal(broker: RunningBroker, **fields: object):
    """The request error an InitProducerId gets (in the response header)."""
    with broker.connect() as client:
        client.send(InitProducerIdRequest(**fields))
        header, _ = client.read_response(InitProducerIdRequest())
    return header


def test_ids_are_new_and_an_epoch_bump_keeps_the_id(broker: RunningBroker) -> None:
    first, second = init(broker), init(broker)
    assert first.producer_epoch == 0
    assert second.producer_id != first.producer_id
    bumped = init(broker, producer_id=first.producer_id, producer_epoch=0)
    assert (bumped.producer_id, bumped.producer_epoch) == (first.producer_id, 1)
    exhausted = init(broker, producer_id=first.producer_id, producer_epoch=32766)
    assert exhausted.producer_epoch == 0 and exhausted.producer_id not in (
        first.producer_id,
        second.producer_id,
    )


@pytest.mark.parametrize(
    ("fields", "error"),
    [
        ({"transactional_id": "tx-1"}, UnsupportedVersionError),
        ({"producer_id": 5}, InvalidRequestError),
        ({"producer_id": 10**12, "producer_epoch": 0}, InvalidRequestError),
    ],
)
def test_refusals_say_why(broker: RunningBroker, fields: dict, error: type) -> None:
    header = refusal(broker, **fields)
    assert header.error == error.code and header.message


def produce(broker: RunningBroker, topic: str, pid: int, epoch: int, seq: int):
    records = build_batch(
        [(1_700_000_000_000, b"k", b"v", ())],
        producer_id=pid,
        producer_epoch=epoch,
        base_sequence=seq,
    )
    with broker.connect() as client:
        if topic not in broker.broker.log_manager.topics():
            client.call(CreateTopicsRequest((CreatableTopic(topic, 1),)))
        response = client.call(ProduceRequest((ProducePartitionData(topic, 0, records),)))
    return response.partitions[0]


def test_fencing_and_gaps_are_answered_with_kafkas_codes(broker: RunningBroker) -> None:
    pid = init(broker).producer_id
    assert produce(broker, "fenced", pid, 1, 0).error == 0
    assert produce(broker, "fenced", pid, 0, 1).error == InvalidProducerEpochError.code
    assert produce(broker, "fenced", pid, 1, 5).error == OutOfOrderSequenceNumberError.code
    again = produce(broker, "fenced", pid, 1, 0)
    assert (again.error, again.base_offset) == (0, 0)


def kafka_call(broker: RunningBroker, api_key: int, version: int, body: dict) -> dict:
    """One Kafka-protocol request encoded and its response decoded by odradek's codec."""
    from kafka_helpers import KafkaSocket

    kafka = KafkaSocket(broker)
    try:
        payload = b"".join(bytes(p) for p in encode_parts(request_spec(api_key, version), body))
        flexible = request_spec(api_key, version).flexible
        kafka.send(api_key, version, payload, flexible)
        frame = kafka.read_frame()
    finally:
        kafka.close()
    offset = 4 + (1 if response_spec(api_key, version).flexible else 0)
    return decode(response_spec(api_key, version), memoryview(frame), offset)


@pytest.mark.parametrize("version", [0, 2, 4])
def test_init_producer_id_on_kafkas_protocol(broker: RunningBroker, version: int) -> None:
    body = {"transactional_id": None, "transaction_timeout": 60000}
    if version >= 3:
        body.update(producer_id=-1, producer_epoch=-1)
    response = kafka_call(broker, 22, version, body)
    assert response["error_code"] == 0 and response["producer_id"] >= 0
    body["transactional_id"] = f"tx-v{version}"
    transactional = kafka_call(broker, 22, version, body)  # the transaction coordinator's
    assert transactional["error_code"] == 0, transactional
    assert transactional["producer_epoch"] == 0
    assert transactional["producer_id"] > response["producer_id"]


def test_offset_for_leader_epoch_answers_the_log_end_for_epoch_zero(
    broker: RunningBroker,
) -> None:
    pid = init(broker).producer_id
    for seq in range(3):
        assert produce(broker, "epochs", pid, 0, seq).error == 0

    def ask(topic: str, epoch: int, current: int = -1) -> dict:
        body = {
            "replica_id": -1,
            "topics": [
                {
                    "topic": topic,
                    "partitions": [
                        {"partition": 0, "current_leader_epoch": current, "leader_epoch": epoch}
                    ],
                }
            ],
        }
        return kafka_call(broker, 23, 4, body)["topics"][0]["partitions"][0]

    assert (ask("epochs", 0)["leader_epoch"], ask("epochs", 0)["end_offset"]) == (0, 3)
    assert ask("epochs", 0, current=0)["error_code"] == 0
    assert ask("epochs", 0, current=1)["error_code"] == 75  # UNKNOWN_LEADER_EPOCH (not 76)
    assert ask("no-such-topic", 0)["error_code"] == UnknownTopicOrPartitionError.code
    checkpoint = broker.data_dir / "epochs-0" / "leader-epoch-checkpoint"
    deadline = time.monotonic() + 60  # written in the background
    while not checkpoint.exists():
        assert time.monotonic() < deadline
        time.sleep(0.01)
    assert checkpoint.read_text() == "0\n1\n0 0\n"


def generate(manager: ProducerIdManager, count: int) -> list[int]:
    async def run() -> list[int]:
        return [await manager.generate() for _ in range(count)]

    return asyncio.run(run())


def test_ids_never_repeat_across_restarts_and_crashes(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    for directory in dirs:
        directory.mkdir()
    seen: set[int] = set()
    with ThreadPoolExecutor(1) as executor:
        for _ in range(3):  # each "run" ends without any shutdown step: as a crash does
            manager = ProducerIdManager(dirs, executor, block_size=10)
            manager.load()
            ids = generate(manager, 25)
            assert not seen & set(ids) and len(set(ids)) == 25
            seen |= set(ids)
        (dirs[0] / PRODUCER_ID_BLOCK_FILE).unlink()  # one directory lost: the other knows
        manager = ProducerIdManager(dirs, executor, block_size=10)
        manager.load()
        assert min(generate(manager, 1)) > max(seen)
        (dirs[1] / PRODUCER_ID_BLOCK_FILE).write_text("garbage")
        manager = ProducerIdManager(dirs, executor, block_size=10)
        manager.load()
        with pytest.raises(KafkaStorageError, match="unreadable"):
            generate(manager, 1)
        context = RequestContext("127.0.0.1:1", RequestHeader(22, 0, 1, "test"))
        with pytest.raises(KafkaStorageError):
            asyncio.run(manager.init_producer_id(-1, -1, context))


def test_the_block_file_is_kafka_style_text(tmp_path: Path) -> None:
    with ThreadPoolExecutor(1) as executor:
        manager = ProducerIdManager([tmp_path], executor, block_size=1000)
        manager.load()
        generate(manager, 1)
    assert (tmp_path / PRODUCER_ID_BLOCK_FILE).read_text() == "version=0\nblock_end=1000\n"
    assert not list(tmp_path.glob("*.tmp"))


def test_the_log_manager_expires_idle_producers(tmp_path: Path) -> None:
    """producer.id.expiration.ms reaches every partition; the periodic task (first run 30 s
    after start-up, as Kafka's tasks) calls what is called here."""
    with running_broker(tmp_path, {"producer.id.expiration.ms": "200"}) as running:
        pid = init(running).producer_id
        assert produce(running, "idle", pid, 0, 0).error == 0  # timestamped long ago
        log = running.broker.replica_manager.partition("idle", 0).log
        assert pid in log.producer_state.producers
        running.broker.log_manager.remove_expired_producers()
        assert not log.producer_state.producers
        assert produce(running, "idle", pid, 0, 0).base_offset == 1  # a new write now
