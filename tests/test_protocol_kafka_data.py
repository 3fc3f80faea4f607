"""Kafka-data messages (protocol/kafka_data.py) and their generic adapter onto the Kafka
handlers (server/msgpack/kafka_data.py): the codec's names, types and checks, and a broker
answering a Kafka-data request over msgpack with its Kafka handler's answer."""

from __future__ import annotations

import asyncio
import json
import re
import time
import uuid
from pathlib import Path

import pytest
from server_helpers import running_broker

from odradek.errors import (
    InvalidRequestError,
    InvalidTxnStateError,
    TransactionAbortableError,
    TransactionalIdAuthorizationFailedError,
    UnsupportedVersionError,
)
from odradek.protocol.api_keys import SUPPORTED_VERSIONS, ApiKey
from odradek.protocol.api_versions import ApiVersionsRequest
from odradek.protocol.frame import FrameDecoder
from odradek.protocol.header import RequestHeader, ResponseHeader
from odradek.protocol.kafka import api_versions as kafka_apis
from odradek.protocol.kafka.message_codec import read_defaults
from odradek.protocol.kafka_data import (
    KAFKA_DATA_VERSIONS,
    from_wire,
    kafka_data_request,
    kafka_data_response,
    to_wire,
)
from odradek.protocol.messages import decode_request, decode_response, encode_request
from odradek.protocol.produce import Acks, ProducePartitionData, ProduceRequest
from odradek.protocol.topics import CreatableTopic, CreateTopicsRequest
from odradek.record.record_batch_builder import RecordBatchBuilder
from odradek.server.msgpack.kafka_data import MsgpackKafkaData
from odradek.server.request_context import RequestContext

END_TXN = kafka_data_request(ApiKey.END_TXN, 0)
INIT_PRODUCER_ID = kafka_data_request(ApiKey.INIT_PRODUCER_ID, 1)
TXN_OFFSET_COMMIT = kafka_data_request(ApiKey.TXN_OFFSET_COMMIT, 0)
DESCRIBE_TRANSACTIONS_RESPONSE = kafka_data_response(ApiKey.DESCRIBE_TRANSACTIONS, 0)


def round_trip(request: object, version: int) -> object:
    header = RequestHeader(request.api_key, version, 9, "test")
    (frame,) = FrameDecoder().feed(b"".join(bytes(p) for p in encode_request(header, request)))
    return decode_request(RequestHeader.from_header(frame.header), frame)


def test_a_request_travels_under_kafkas_field_names() -> None:
    request = INIT_PRODUCER_ID.from_header(
        {"transactional_id": "tx-1", "transaction_timeout_ms": 60000}
    )
    # In memory: the Kafka request model the Kafka handlers read (kio's names, defaults in).
    assert request.data == {
        "transactional_id": "tx-1",
        "transaction_timeout": 60000,
        "producer_id": -1,
        "producer_epoch": -1,
    }
    # On the wire: Kafka's names (TransactionTimeoutMs), every field.
    assert request.to_header() == {
        "transactional_id": "tx-1",
        "transaction_timeout_ms": 60000,
        "producer_id": -1,
        "producer_epoch": -1,
    }
    assert round_trip(request, 1) == request


def test_kafka_4_names_where_kio_has_an_older_one() -> None:
    wire = {
        "transactional_id": "tx",
        "group_id": "g",
        "producer_id": 1,
        "producer_epoch": 0,
        "generation_id_or_member_epoch": 3,
        "topics": [{"name": "t", "partitions": [{"partition_index": 0, "committed_offset": 5}]}],
    }
    request = TXN_OFFSET_COMMIT.from_header(wire)
    assert request.data["generation_id"] == 3
    partition = request.data["topics"][0]["partitions"][0]
    assert partition == {
        "partition_index": 0,
        "committed_offset": 5,
        "committed_leader_epoch": -1,
        "committed_metadata": None,  # nullable: nil when left out
    }
    assert request.to_header()["generation_id_or_member_epoch"] == 3


def test_every_wire_key_is_kafkas_field_name_in_snake_case() -> None:
    """Against the message specs of the Kafka 4.4 client jar, when it is at hand."""
    jars = sorted(Path.home().glob(".m2/repository/org/apache/kafka/kafka-clients/4.4*/*.jar"))
    if not jars:
        pytest.skip("the Kafka 4.4 client jar is not in ~/.m2 (it holds Kafka's message specs)")
    import zipfile

    def snake(name: str) -> str:
        name = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
        return re.sub(r"(?<=[a-z0-9])([A-Z])", r"_\1", name).lower()

    def in_versions(versions: str, version: int) -> bool:
        if versions.endswith("+"):
            return version >= int(versions[:-1])
        low, _, high = versions.partition("-")
        return int(low) <= version <= int(high or low)

    def kafka_names(fields: list, version: int, common: dict) -> list:
        names = []
        for field in fields:
            if in_versions(field["versions"], version):
                sub = field.get("fields") or common.get(field["type"].lstrip("[]"))
                names.append(
                    (snake(field["name"]), kafka_names(sub, version, common) if sub else None)
                )
        return names

    def wire_names(wire: dict) -> list:
        return [
            (key, wire_names(value[0] if isinstance(value, list) else value))
            if isinstance(value, dict)
            or (isinstance(value, list) and value and isinstance(value[0], dict))
            else (key, None)
            for key, value in wire.items()
        ]

    with zipfile.ZipFile(jars[0]) as jar:
        for (api_key, version), kafka_version in KAFKA_DATA_VERSIONS.items():
            for kind, message in (
                ("Request", kafka_data_request(api_key, version)),
                ("Response", kafka_data_response(api_key, version)),
            ):
                text = jar.read(f"common/message/{api_key.display_name}{kind}.json").decode()
                spec = json.loads(
                    "\n".join(x for x in text.splitlines() if not x.strip().startswith("//"))
                )
                common = {c["name"]: c["fields"] for c in spec.get("commonStructs", [])}
                expected = kafka_names(spec["fields"], kafka_version, common)
                sample = to_wire(message.spec, _filled(message.spec))
                assert _shape(wire_names(sample)) == _shape(expected), (api_key, kind)


def _filled(spec: object) -> dict:
    """Data with one entry in every array of structs, so nested names show."""
    data = read_defaults(spec)
    for field in (*spec.fields, *spec.tagged.values()):
        if field.entity is not None and field.is_array:
            data[field.name] = [_filled(field.entity)]
        elif field.entity is not None:
            data[field.name] = _filled(field.entity)
    return data


def _shape(names: list) -> list:
    return sorted((name, _shape(sub) if sub else None) for name, sub in names)


@pytest.mark.parametrize(
    ("wire", "problem"),
    [
        ({"producer_id": 1, "producer_epoch": 0, "committed": True}, "transactional_id is missing"),
        (
            {"transactional_id": "t", "producer_id": "1", "producer_epoch": 0, "committed": True},
            "producer_id must be an int64, got str '1'",
        ),
        (
            {"transactional_id": "t", "producer_id": 1, "producer_epoch": 40000, "committed": 1},
            "producer_epoch must be an int16, got int 40000",
        ),
        (
            {"transactional_id": "t", "producer_id": 1, "producer_epoch": 0, "committed": 1},
            "committed must be a boolean, got int 1",
        ),
        (
            {"transactional_id": None, "producer_id": 1, "producer_epoch": 0, "committed": True},
            "transactional_id must be a string, got NoneType None",
        ),
    ],
)
def test_bad_fields_are_named(wire: dict, problem: str) -> None:
    with pytest.raises(InvalidRequestError) as raised:
        END_TXN.from_header(wire)
    assert str(raised.value.message) == problem


def test_nested_bad_fields_are_named_by_their_path() -> None:
    wire = {
        "transactional_id": "tx",
        "group_id": "g",
        "producer_id": 1,
        "producer_epoch": 0,
        "topics": [{"name": "t", "partitions": [{"partition_index": "x", "committed_offset": 5}]}],
    }
    with pytest.raises(
        InvalidRequestError,
        match=r"INVALID_REQUEST: topics\[0\]\.partitions\[0\]\.partition_index ",
    ):
        TXN_OFFSET_COMMIT.from_header(wire)
    with pytest.raises(InvalidRequestError, match="payload bytes are not covered"):
        END_TXN.from_header(
            {"transactional_id": "t", "producer_id": 1, "producer_epoch": 0, "committed": True},
            memoryview(b"x"),
        )


def test_a_response_fills_in_what_the_handler_left_out() -> None:
    started = 1_700_000_000_000
    response = DESCRIBE_TRANSACTIONS_RESPONSE(
        {
            "transaction_states": [
                {
                    "error_code": 0,
                    "transactional_id": "tx",
                    "transaction_state": "Ongoing",
                    "transaction_timeout": 60000,
                    "transaction_start_time": started,
                    "producer_id": 7,
                    "producer_epoch": 2,
                    "topics": [{"topic": "t", "partitions": [0, 1]}],
                }
            ]
        }
    )
    wire = response.to_header()
    assert wire["throttle_time_ms"] == 0
    assert wire["transaction_states"][0]["transaction_start_time_ms"] == started
    assert wire["transaction_states"][0]["transaction_timeout_ms"] == 60000
    decoded = DESCRIBE_TRANSACTIONS_RESPONSE.from_header(wire)
    assert decoded.data["transaction_states"][0]["topics"] == [{"topic": "t", "partitions": [0, 1]}]


def test_uuids_travel_as_16_bytes() -> None:
    from odradek.protocol.kafka.message_codec import EntitySpec, FieldSpec

    spec = EntitySpec(
        "Probe", True, (FieldSpec("topic_id", "uuid", False, False, None, None, 0),), {}
    )
    topic_id = uuid.uuid4()
    assert to_wire(spec, {"topic_id": topic_id}) == {"topic_id": topic_id.bytes}
    assert from_wire(spec, {"topic_id": topic_id.bytes}) == {"topic_id": topic_id}
    with pytest.raises(InvalidRequestError, match="topic_id must be a uuid"):
        from_wire(spec, {"topic_id": b"short"})


def test_the_kafka_versions_carried_are_ones_the_kafka_listener_serves() -> None:
    """The seam: each Kafka-data version maps onto a version the Kafka handlers serve (for
    the APIs the Kafka listener advertises; the others are refused until it does)."""
    for (api_key, version), kafka_version in KAFKA_DATA_VERSIONS.items():
        low, high = SUPPORTED_VERSIONS[api_key]
        assert low <= version <= high
        if api_key in kafka_apis.ADVERTISED:
            assert kafka_apis.is_served(api_key, kafka_version), (api_key, kafka_version)


def test_an_api_without_a_kafka_handler_is_refused_saying_so() -> None:
    request = END_TXN.from_header(
        {"transactional_id": "t", "producer_id": 1, "producer_epoch": 0, "committed": True}
    )
    context = RequestContext("peer", RequestHeader(ApiKey.END_TXN, 0, 1, "c"))
    with pytest.raises(UnsupportedVersionError, match="EndTxn is not served by this broker"):
        asyncio.run(MsgpackKafkaData({}).handle(request, context))


def test_the_kafka_handler_gets_the_kafka_version_and_the_data() -> None:
    seen = []

    async def handler(request: object, context: RequestContext) -> dict:
        seen.append((request, context.header))
        return {"error_code": 0, "producer_id": 7, "producer_epoch": 3}

    request = END_TXN.from_header(
        {"transactional_id": "t", "producer_id": 7, "producer_epoch": 2, "committed": False}
    )
    context = RequestContext("peer", RequestHeader(ApiKey.END_TXN, 0, 41, "client-x"))
    response = asyncio.run(MsgpackKafkaData({ApiKey.END_TXN: handler}).handle(request, context))
    ((kafka_request, header),) = seen
    assert (kafka_request.api_key, kafka_request.api_version) == (ApiKey.END_TXN, 5)
    assert (kafka_request.correlation_id, kafka_request.client_id) == (41, "client-x")
    assert kafka_request.body == request.data
    assert header == RequestHeader(ApiKey.END_TXN, 5, 41, "client-x")
    assert response.data == {"error_code": 0, "producer_id": 7, "producer_epoch": 3}
    assert response.to_header() == {
        "throttle_time_ms": 0,
        "error_code": 0,
        "producer_id": 7,
        "producer_epoch": 3,
    }


def test_a_broker_answers_describe_cluster_over_msgpack_with_its_kafka_handler(
    tmp_path: Path,
) -> None:
    describe_cluster = kafka_data_request(ApiKey.DESCRIBE_CLUSTER, 0)
    with running_broker(tmp_path) as broker, broker.connect() as client:
        handshake = client.call(ApiVersionsRequest())
        versions = {v.api_key: (v.min_version, v.max_version) for v in handshake.api_versions}
        assert versions[ApiKey.DESCRIBE_CLUSTER] == (0, 0)
        assert versions[ApiKey.INIT_PRODUCER_ID] == (0, 1)
        client.send(describe_cluster.from_header({"include_cluster_authorized_operations": False}))
        response = decode_response(ApiKey.DESCRIBE_CLUSTER, client.read_frame())
        data = response.data
        assert data["error_code"] == 0
        assert data["cluster_id"] == handshake.cluster_id
        assert [(b["broker_id"], b["host"], b["port"]) for b in data["brokers"]] == [
            (broker.broker.config.broker_id, "127.0.0.1", broker.port)
        ]
        # A bad field is the request error INVALID_REQUEST naming it; the connection stays.
        client.send_frame({"api": 60, "v": 0, "id": 5, "include_cluster_authorized_operations": 1})
        frame = client.read_frame()
        header = ResponseHeader.from_header(frame.header)
        assert (header.error, header.message) == (
            InvalidRequestError.code,
            "include_cluster_authorized_operations must be a boolean, got int 1",
        )


def test_the_end_txn_example_of_the_protocol_doc_is_what_the_encoder_writes() -> None:
    text = (Path(__file__).resolve().parent.parent / "docs" / "protocol.md").read_text()
    documented = (
        '`{"api": 26, "v": 0, "id": 9, "client_id": nil, "transactional_id": "tx-1", '
        '"producer_id":\n4000, "producer_epoch": 3, "committed": true}`'
    )
    assert documented in text
    request = END_TXN.from_header(
        {"transactional_id": "tx-1", "producer_id": 4000, "producer_epoch": 3, "committed": True}
    )
    parts = encode_request(RequestHeader(ApiKey.END_TXN, 0, 9), request)
    (frame,) = FrameDecoder().feed(b"".join(bytes(p) for p in parts))
    assert frame.header == {
        "api": 26,
        "v": 0,
        "id": 9,
        "client_id": None,
        "transactional_id": "tx-1",
        "producer_id": 4000,
        "producer_epoch": 3,
        "committed": True,
    }
    assert list(frame.header) == ["api", "v", "id", "client_id", *request.data]
    assert bytes(frame.payload) == b""


def _transactional_batch(producer_id: int, epoch: int, sequence: int = 0) -> bytes:
    builder = RecordBatchBuilder(
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
        is_transactional=True,
    )
    builder.append(int(time.time() * 1000), b"k", b"v")
    return builder.build()


def test_a_transactional_produce_over_msgpack_is_checked_against_its_transaction(
    tmp_path: Path,
) -> None:
    """As on Kafka's protocol: a transactional batch needs the request's transactional id and
    goes only to a partition of its producer's open transaction, so no partition is left
    holding records of a transaction its coordinator does not know (a hanging transaction,
    pinning the last stable offset); the acks=1 one-partition produce a broker answers at
    once included."""
    init = kafka_data_request(ApiKey.INIT_PRODUCER_ID, 1)
    add = kafka_data_request(ApiKey.ADD_PARTITIONS_TO_TXN, 0)
    with running_broker(tmp_path) as broker, broker.connect() as client:
        client.call(CreateTopicsRequest((CreatableTopic("t", 2),)))
        client.call(
            kafka_data_request(ApiKey.FIND_COORDINATOR, 1)(
                {"key_type": 1, "coordinator_keys": ["tx"]}
            )
        )
        found = client.call(init({"transactional_id": "tx", "transaction_timeout": 60000})).data
        assert found["error_code"] == 0, found
        producer_id, epoch = found["producer_id"], found["producer_epoch"]

        def produce(transactional_id: str | None, acks: Acks, partition: int = 0) -> tuple:
            request = ProduceRequest(
                (ProducePartitionData("t", partition, _transactional_batch(producer_id, epoch)),),
                acks,
                transactional_id=transactional_id,
            )
            (answer,) = client.call(request).partitions
            return answer.error, answer.base_offset

        for acks in (Acks.ALL, Acks.LEADER):
            error, _ = produce(None, acks)
            assert error == TransactionalIdAuthorizationFailedError.code
        error, _ = produce("tx", Acks.ALL)
        assert error in (InvalidTxnStateError.code, TransactionAbortableError.code), error
        added = client.call(
            add(
                {
                    "v3_and_below_transactional_id": "tx",
                    "v3_and_below_producer_id": producer_id,
                    "v3_and_below_producer_epoch": epoch,
                    "v3_and_below_topics": [{"name": "t", "partitions": [0]}],
                }
            )
        ).data
        assert added["results_by_topic_v3_and_below"][0]["results_by_partition"] == [
            {"partition_index": 0, "partition_error_code": 0}
        ]
        assert produce("tx", Acks.ALL) == (0, 0)  # the first record of partition 0
        error, _ = produce("tx", Acks.ALL, partition=1)  # not added
        assert error in (InvalidTxnStateError.code, TransactionAbortableError.code), error
        assert broker.broker.replica_manager.partition("t", 1).log.log_end_offset == 0
