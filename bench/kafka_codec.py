"""Decode cost per request: Kafka's protocol (odradek's bounded codec, and kio's native
reader) beside odradek's msgpack protocol, for a Produce of one 1 KB batch and a Metadata
request; and the encode cost of a Fetch response. Prints, asserts nothing.

Run: .venv/bin/python bench/kafka_codec.py
"""

from __future__ import annotations

import timeit

from odradek.protocol.frame import decode_frame
from odradek.protocol.header import RequestHeader
from odradek.protocol.kafka.message_codec import decode, encode_parts, request_spec, response_spec
from odradek.protocol.messages import decode_request, encode_request
from odradek.protocol.produce import ProduceRequest
from odradek.protocol.values.produce import Acks, ProducePartitionData

RECORDS = b"x" * 1000
ROUNDS = 20000


def per_call_us(function: object) -> float:
    return min(timeit.repeat(function, number=ROUNDS, repeat=3)) / ROUNDS * 1e6


def main() -> None:
    produce_spec = request_spec(0, 9)
    produce_values = {
        "acks": 1,
        "timeout": 30000,
        "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": RECORDS}]}],
    }
    kafka_produce = memoryview(b"".join(encode_parts(produce_spec, produce_values)))
    metadata_spec = request_spec(3, 12)
    kafka_metadata = memoryview(
        b"".join(encode_parts(metadata_spec, {"topics": [{"name": "orders"}]}))
    )
    header = RequestHeader(0, 0, 1, "bench")
    msgpack_frame = b"".join(
        bytes(p)
        for p in encode_request(
            header, ProduceRequest((ProducePartitionData("t", 0, RECORDS),), Acks.LEADER)
        )
    )[4:]

    def msgpack_produce() -> None:
        frame = decode_frame(msgpack_frame)
        decode_request(RequestHeader.from_header(frame.header), frame)

    from odradek.protocol.kafka.produce_request import read_produce_request

    rows = [
        (
            "Produce v9, 1 KB: odradek hand-written reader",
            per_call_us(lambda: read_produce_request(kafka_produce, 0, 9)),
        ),
        (
            "Produce v9, 1 KB: odradek Kafka codec",
            per_call_us(lambda: decode(produce_spec, kafka_produce)),
        ),
        ("Produce, 1 KB: odradek msgpack protocol", per_call_us(msgpack_produce)),
        (
            "Metadata v12: odradek Kafka codec",
            per_call_us(lambda: decode(metadata_spec, kafka_metadata)),
        ),
    ]
    try:
        from kio.schema.metadata.v12.request import MetadataRequest as KioMetadata
        from kio.schema.produce.v9.request import ProduceRequest as KioProduce
        from kio.serial import entity_reader

        read_produce, read_metadata = entity_reader(KioProduce), entity_reader(KioMetadata)
        rows.insert(
            1,
            (
                "Produce v9, 1 KB: kio native reader",
                per_call_us(lambda: read_produce(kafka_produce, 0)),
            ),
        )
        rows.append(
            (
                "Metadata v12: kio native reader",
                per_call_us(lambda: read_metadata(kafka_metadata, 0)),
            )
        )
    except ImportError:
        pass
    fetch_spec = response_spec(1, 12)
    fetch_values = {
        "responses": [
            {
                "topic": "t",
                "partitions": [{"partition_index": 0, "high_watermark": 10, "records": RECORDS}],
            }
        ]
    }
    rows.append(
        (
            "Fetch v12 response encode: odradek Kafka codec",
            per_call_us(lambda: encode_parts(fetch_spec, fetch_values)),
        )
    )
    for name, cost in rows:
        print(f"{name:<52} {cost:8.2f} us")


if __name__ == "__main__":
    main()
