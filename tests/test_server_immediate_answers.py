"""A produce or fetch a connection answers at once (one partition, acks 0 or 1, or nothing new
to fetch) gets, through a real broker, the very bytes the general path gives the same request
in the same state; and whatever that path does not take reaches the general one."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from server_helpers import RawClient, RunningBroker, batch, read_partition, running_broker

from odradek.errors import UnknownServerError
from odradek.protocol.delete_records import DeleteRecordsPartition, DeleteRecordsRequest
from odradek.protocol.topics import CreatableTopic, CreateTopicsRequest
from odradek.server.msgpack.connection import MsgpackConnection
from odradek.server.replica_manager import ReplicaManager

ANSWER_AT_ONCE = MsgpackConnection._answer_at_once


@pytest.fixture
def broker(tmp_path: Path) -> Iterator[RunningBroker]:
    with running_broker(tmp_path) as running:
        yield running


class Paths:
    """Switches every connection between the immediate path (counting what it answers) and
    the general one alone."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self._monkeypatch = monkeypatch
        self.answered: list[bool] = []

    def immediate(self) -> None:
        def spy(connection: MsgpackConnection, *request: object) -> object:
            answer = ANSWER_AT_ONCE(connection, *request)
            self.answered.append(answer is not None)
            return answer

        self._monkeypatch.setattr(MsgpackConnection, "_answer_at_once", spy)

    def general(self) -> None:
        self._monkeypatch.setattr(MsgpackConnection, "_answer_at_once", lambda *_: None)


@pytest.fixture
def paths(monkeypatch: pytest.MonkeyPatch) -> Paths:
    return Paths(monkeypatch)


def exchange(client: RawClient, header: dict[str, Any], payload: bytes = b"") -> tuple[Any, ...]:
    client.send_frame({"api": header.pop("api"), "v": 0, "id": 7, **header}, payload)
    frame = client.read_frame()
    return frame.header, bytes(frame.payload)


def fetch_header(topic: str, partition: int, offset: int, **options: object) -> dict[str, Any]:
    entry = {"topic": topic, "partition": partition, "fetch_offset": offset}
    return {"api": 1, "partitions": [entry], "max_wait_ms": 0, **options}


def produce_header(topic: str, partition: int, size: int, acks: int) -> dict[str, Any]:
    entry = {"topic": topic, "partition": partition, "size": size}
    return {"api": 0, "partitions": [entry], "acks": acks}


def test_fetches_get_the_general_paths_answer(broker: RunningBroker, paths: Paths) -> None:
    with broker.connect() as client:
        client.call(CreateTopicsRequest((CreatableTopic("t", 2),)))
        for _ in range(4):
            assert (
                exchange(client, produce_header("t", 0, len(batch()), 1), batch())[0]["error"] == 0
            )
        client.call(DeleteRecordsRequest((DeleteRecordsPartition("t", 0, 1),)))
        headers = [
            fetch_header(topic, partition, offset, isolation=isolation, **options)
            for topic in ("t", "missing", "bad/name")
            for partition in (0, 1, 5)
            for offset in (-1, 0, 1, 3, 4, 5)
            for isolation in ("high_watermark", "log_end")
            for options in ({}, {"max_wait_ms": 50, "min_bytes": 0}, {"max_bytes": 0})
        ]
        for header in headers:
            paths.immediate()
            immediate = exchange(client, dict(header))
            paths.general()
            assert immediate == exchange(client, dict(header)), header
    # at the log end of either partition (offset 4 of partition 0, 0 of partition 1)
    assert paths.answered.count(True) == 2 * 2 * 3  # partitions, isolations, options


def test_produces_get_the_general_paths_answer(broker: RunningBroker, paths: Paths) -> None:
    good = batch(2)
    requests = [
        (produce_header("{topic}", 0, len(good), 1), good),
        (produce_header("{topic}", 1, len(good), 1), good),
        (produce_header("{topic}", 0, len(good), 0), good),
        (produce_header("{topic}", 0, 5, 1), b"torn!"),  # refused: not a batch
        (produce_header("{topic}", 9, len(good), 1), good),  # no such partition
        (produce_header("{topic}", 0, 0, 1), b""),  # no batch at all
        (produce_header("{topic}", 0, len(good), 1), good),
        (produce_header("{topic}", 0, len(good), -1), good),  # acks=all: general path
    ]
    with broker.connect() as client:
        client.call(
            CreateTopicsRequest((CreatableTopic("immediate", 2), CreatableTopic("general", 2)))
        )
        for header, payload in requests:
            answers = []
            for topic, path in (("immediate", paths.immediate), ("general", paths.general)):
                path()
                entry = dict(header["partitions"][0], topic=topic)
                request = {**header, "partitions": [entry]}
                if header["acks"] == 0:
                    client.send_frame({"api": 0, "v": 0, "id": 7, **request}, payload)
                    exchange(client, fetch_header(topic, 0, 0))  # done before the path changes
                    continue
                response, records = exchange(client, request, payload)
                for partition in response.get("partitions", []):
                    partition["topic"] = "{topic}"
                    if partition["message"]:
                        partition["message"] = partition["message"].replace(topic, "{topic}")
                answers.append((response, records))
            if answers:
                assert answers[0] == answers[1], header
        for partition in (0, 1):
            general = read_partition(client, "general", partition)
            assert read_partition(client, "immediate", partition) == general
    # (a request of no records, or acks=all, is not even read as one answered at once)
    assert paths.answered == [True, True, True, False, False, False, True]


def test_an_unexpected_failure_is_answered_and_the_connection_goes_on(
    broker: RunningBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    with broker.connect() as client:
        client.call(CreateTopicsRequest((CreatableTopic("t", 1),)))

        def broken(*_: object) -> None:
            raise RuntimeError("a bug")

        monkeypatch.setattr(ReplicaManager, "append_at_once", broken)
        response, _ = exchange(client, produce_header("t", 0, len(batch()), 1), batch())
        assert (response["id"], response["error"]) == (7, UnknownServerError.code)
        assert "see its log" in response["message"]
        monkeypatch.undo()
        response, _ = exchange(client, produce_header("t", 0, len(batch()), 1), batch())
        assert response["error"] == 0 and response["partitions"][0]["base_offset"] == 0


def test_a_quota_set_while_running_takes_requests_off_the_immediate_path(
    broker: RunningBroker, paths: Paths
) -> None:
    """Quotas come and go on a running broker: while one is in force a produce is counted
    against it (and throttled) on the general path, and once it is gone the immediate path
    answers again."""
    from odradek.protocol.client_quotas import (
        AlterClientQuotasEntry,
        AlterClientQuotasRequest,
        QuotaEntityPart,
        QuotaOp,
    )

    every_client = (QuotaEntityPart("client-id", None),)
    rate = "producer_byte_rate"
    paths.immediate()
    with broker.connect() as client:
        client.call(CreateTopicsRequest((CreatableTopic("t", 1),)))
        response, _ = exchange(client, produce_header("t", 0, len(batch()), 1), batch())
        assert response["throttle_time_ms"] == 0
        assert paths.answered == [True]
        client.call(
            AlterClientQuotasRequest((AlterClientQuotasEntry(every_client, (QuotaOp(rate, 1),)),))
        )
        response, _ = exchange(client, produce_header("t", 0, len(batch()), 1), batch())
        assert response["error"] == 0 and response["throttle_time_ms"] > 0
        assert paths.answered == [True, False]
    with broker.connect() as client:  # (the first is muted while its throttle lasts)
        client.call(
            AlterClientQuotasRequest(
                (AlterClientQuotasEntry(every_client, (QuotaOp(rate, remove=True),)),)
            )
        )
        response, _ = exchange(client, produce_header("t", 0, len(batch()), 1), batch())
        assert response["throttle_time_ms"] == 0
        assert response["partitions"][0]["base_offset"] == 2
        assert paths.answered == [True, False, True]


def _counts(broker: RunningBroker, api: str) -> tuple[float, float, float]:
    """(requests answered without error, latencies observed, their sum in seconds) of ``api``
    on the msgpack protocol."""
    samples = broker.metrics()
    labels = f'api="{api}",protocol="msgpack"'
    return (
        samples.get(f'odradek_requests_total{{api="{api}",error="NONE",protocol="msgpack"}}', 0),
        samples.get(f"odradek_request_latency_seconds_count{{{labels}}}", 0),
        samples.get(f"odradek_request_latency_seconds_sum{{{labels}}}", 0.0),
    )


def test_requests_are_counted_alike(broker: RunningBroker, paths: Paths) -> None:
    """Each request answered at once is counted once, in the general path's series, with a
    latency from its arrival (not from some other time: a few milliseconds at most here)."""
    with broker.connect() as client:
        client.call(CreateTopicsRequest((CreatableTopic("t", 1),)))
        paths.general()
        exchange(client, produce_header("t", 0, len(batch()), 1), batch())
        exchange(client, fetch_header("t", 0, 1))
        before = {api: _counts(broker, api) for api in ("Produce", "Fetch")}
        assert [before[api][:2] for api in before] == [(1, 1), (1, 1)]
        paths.immediate()
        for offset in range(2, 5):
            exchange(client, produce_header("t", 0, len(batch()), 1), batch())
            exchange(client, fetch_header("t", 0, offset))
        assert paths.answered == [True] * 6
        after = {api: _counts(broker, api) for api in ("Produce", "Fetch")}
    for api in ("Produce", "Fetch"):
        assert after[api][:2] == (before[api][0] + 3, before[api][1] + 3)
        assert 0 < after[api][2] - before[api][2] < 1.0
    assert broker.metrics()["odradek_request_memory_bytes"] == 0
