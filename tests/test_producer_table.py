"""A partition's producer table: the C type (``_producer_table.c``) against its Python twin
(``producer_table.py``), and both against Kafka's rules alone.

Three producer state managers take the same random requests: one on the C table, one on the
twin, and one whose table never takes the common-batch path (``try_next`` always declines), so
every request goes through ProducerAppendInfo's rules. The requests are in-sequence batches,
gaps, retries of each of a producer's last five batches, older and newer epochs, sequences
that wrap after 2^31 - 1, several batches at once, unknown producers; between them, batches
replayed from the log unchecked, producers expiring, the state written to a snapshot and read
back, and the table cleared. After every step the three must have given the same verdict
(written, duplicate with the same batch, or the same error) and hold the same entries, rows
and last offsets; the C table and the twin must also agree on which requests were the common
batch. The requests are batch headers only (61 bytes each, no records): the table and the
rules read nothing else. Also under ``make sanitize``.
"""

from __future__ import annotations

import struct
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis_budget import examples

from odradek.errors import InvalidProducerEpochError, OutOfOrderSequenceNumberError
from odradek.int_limits import INT32_MAX
from odradek.storage.batch_metadata import decrease_sequence, increase_sequence
from odradek.storage.producer_snapshot_file import decode_snapshot
from odradek.storage.producer_state_manager import ProducerStateManager
from odradek.storage.producer_table import PythonProducerTable

native = pytest.importorskip("odradek.storage._producer_table")

# baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta,
# baseTimestamp, maxTimestamp, producerId, producerEpoch, baseSequence, recordsCount
HEADER = struct.Struct(">qiibIhiqqqhii")
assert HEADER.size == 61
PRODUCER_IDS = (0, 1, 7, 2**40 + 3)


class RulesOnlyTable(PythonProducerTable):
    """A table that never answers the common batch: every request meets the rules."""

    def try_next(self, records: bytes | bytearray | memoryview) -> bool:
        return False


def header(
    base_offset: int, delta: int, timestamp: int, producer_id: int, epoch: int, sequence: int
) -> bytes:
    return HEADER.pack(
        base_offset, 61 - 12, 0, 2, 0, 0, delta, timestamp, timestamp, producer_id, epoch,
        sequence, delta + 1,
    )  # fmt: skip


def managers() -> list[ProducerStateManager]:
    made = []
    for table in (native.ProducerTable(), PythonProducerTable(), RulesOnlyTable()):
        manager = ProducerStateManager(Path("/nonexistent"), "topic-0", 10_000)
        manager.table = table
        made.append(manager)
    return made


def append(manager: ProducerStateManager, records: bytes) -> tuple[bool, object]:
    """(whether the table took it as the common batch, the verdict)."""
    if manager.table.try_next(records):
        manager.table.commit_next()
        return True, "written"
    try:
        info = manager.analyze(records)
    except (InvalidProducerEpochError, OutOfOrderSequenceNumberError) as error:
        return False, type(error).__name__
    if info.duplicate is not None:
        return False, ("duplicate", tuple(info.duplicate))
    manager.update(info)
    return False, "written"


def state(manager: ProducerStateManager) -> tuple[object, ...]:
    table = manager.table
    ids = table.producer_ids()
    return (
        len(table),
        ids,
        [table.get(pid) for pid in (*PRODUCER_IDS, *ids)],
        [pid in table for pid in PRODUCER_IDS],
        table.rows(),
        table.last_data_offsets(),
        manager.snapshot_bytes(),
    )


@st.composite
def batch_of(draw: st.DrawFn, twin: PythonProducerTable, timestamp: int) -> tuple:
    """(producer id, epoch, base sequence, delta): mostly what a producer would send next,
    often a retry, a gap, an epoch change or a wrap."""
    producer_id = draw(st.sampled_from(PRODUCER_IDS))
    known = twin.get(producer_id)
    delta = draw(st.sampled_from((0, 0, 1, 4)))
    if known is None or not known[2]:
        epoch = known[0] if known is not None and known[0] >= 0 else draw(st.integers(0, 2))
        sequence = draw(st.sampled_from((0, 0, 5, INT32_MAX - 1, INT32_MAX)))
        return producer_id, epoch, sequence, delta
    epoch, _, batches = known
    last_seq = batches[-1][0]
    kind = draw(
        st.sampled_from(
            ("next", "next", "next", "next", "retry", "gap", "older epoch", "new epoch",
             "new epoch mid-sequence", "near the wrap")
        )
    )  # fmt: skip
    if kind == "next":
        return producer_id, epoch, increase_sequence(last_seq, 1), delta
    if kind == "retry":  # each of the last five batches, with its own range
        retried_seq, _, retried_delta, _ = draw(st.sampled_from(batches))
        return producer_id, epoch, decrease_sequence(retried_seq, retried_delta), retried_delta
    if kind == "gap":
        return producer_id, epoch, increase_sequence(last_seq, draw(st.integers(2, 9))), delta
    if kind == "older epoch":
        return producer_id, max(0, epoch - 1), increase_sequence(last_seq, 1), delta
    if kind == "new epoch":
        return producer_id, epoch + 1, 0, delta
    if kind == "new epoch mid-sequence":
        return producer_id, epoch + 1, 3, delta
    return producer_id, epoch, INT32_MAX - draw(st.integers(0, 3)), delta


@settings(max_examples=examples(300), deadline=None)
@given(st.data())
def test_the_c_table_its_twin_and_the_rules_agree(data: st.DataObject) -> None:
    tables = managers()
    twin = tables[1].table
    next_offset, now = 0, 1_000_000
    for _ in range(data.draw(st.integers(1, 60), label="steps")):
        step = data.draw(
            st.sampled_from(
                ("append", "append", "append", "append", "append", "append", "several",
                 "replay", "expire", "snapshot", "clear", "commit without a batch")
            ),
            label="step",
        )  # fmt: skip
        now += data.draw(st.integers(0, 4_000))
        if step in ("append", "several"):
            count = 1 if step == "append" else data.draw(st.integers(2, 3))
            records = b""
            for _ in range(count):
                producer_id, epoch, sequence, delta = data.draw(batch_of(twin, now))
                records += header(next_offset, delta, now, producer_id, epoch, sequence)
                next_offset += delta + 1
            verdicts = [append(manager, records) for manager in tables]
            assert verdicts[0] == verdicts[1], records.hex()
            assert verdicts[2][1] == verdicts[0][1], records.hex()
        elif step == "replay":  # a batch read back from the log: one the rules let through
            producer_id = data.draw(st.sampled_from(PRODUCER_IDS))
            known = twin.get(producer_id)
            delta = data.draw(st.sampled_from((0, 2)))
            if known is None or not known[2]:
                epoch = data.draw(st.integers(0, 3))
                sequence = data.draw(st.sampled_from((0, 11, INT32_MAX)))
            elif data.draw(st.booleans()):
                epoch, sequence = known[0], increase_sequence(known[2][-1][0], 1)
            else:
                epoch, sequence = known[0] + 1, 0
            for manager in tables:
                manager.table.add_batch(
                    producer_id,
                    epoch,
                    increase_sequence(sequence, delta),
                    next_offset + delta,
                    delta,
                    now,
                )
            next_offset += delta + 1
        elif step == "expire":
            expiration_ms = data.draw(st.sampled_from((1, 3_000, 10_000)))
            removed = [manager.table.remove_expired(now, expiration_ms) for manager in tables]
            assert removed[0] == removed[1] == removed[2]
        elif step == "snapshot":
            for manager in tables:
                rows = decode_snapshot(manager.snapshot_bytes())
                manager.table.clear()
                manager._load_entries(rows, now)
        elif step == "clear":
            for manager in tables:
                manager.table.clear()
        else:
            for manager in tables[:2]:
                with pytest.raises(ValueError, match="no batch noted"):
                    manager.table.commit_next()
        expected = state(tables[2])
        assert state(tables[0]) == expected
        assert state(tables[1]) == expected


def test_a_declined_request_leaves_nothing_to_commit() -> None:
    """A request the table declines (here: two batches) forgets the batch noted before it."""
    for table in (native.ProducerTable(), PythonProducerTable()):
        table.put(7, 0, 10, ((0, 0, 0, 10),))
        assert table.try_next(header(1, 0, 20, 7, 0, 1))
        assert not table.try_next(header(1, 0, 20, 7, 0, 1) * 2)
        with pytest.raises(ValueError, match="no batch noted"):
            table.commit_next()


def test_the_tables_keep_the_last_five_batches_in_order_and_expire_idle_producers() -> None:
    for table in (native.ProducerTable(), PythonProducerTable()):
        table.put(3, 1, 5, [(n, 100 + n, 0, n) for n in range(8)])
        assert table.get(3) == (1, 5, tuple((n, 100 + n, 0, n) for n in range(3, 8)))
        for producer_id in range(1000):  # grows the C table's index several times
            table.add_batch(producer_id + 10, 0, 0, producer_id, 0, producer_id)
        assert len(table) == 1001
        assert table.producer_ids()[:3] == [3, 10, 11]
        assert table.remove_expired(1000, 500) == 502  # 3 (idle since 5) and 10..510
        assert table.producer_ids()[0] == 511
        assert table.get(1009) == (0, 999, ((0, 999, 0, 999),))
        assert 3 not in table and 1009 in table
        # An idle time that does not fit an int64 is idle: never an overflow.
        table.put(-1, 0, -(2**63), ())
        assert table.remove_expired(2**63 - 1, 2**62) == 500
        assert len(table) == 0 and table.rows() == [] and table.get(511) is None


def test_a_table_that_lost_most_producers_to_expiry_keeps_the_rest_in_order() -> None:
    """The C table gives back the memory of expired producers: the survivors are found and
    keep their order, and the table grows again from there."""
    for table in (native.ProducerTable(), PythonProducerTable()):
        for producer_id in range(5000):
            table.add_batch(producer_id * 7919, 0, 0, producer_id, 0, producer_id % 500)
        assert table.remove_expired(1000, 502) == 4990  # kept: timestamp 499 (ten of them)
        survivors = [producer_id * 7919 for producer_id in range(499, 5000, 500)]
        assert table.producer_ids() == survivors
        assert [table.get(pid)[1] for pid in survivors] == [499] * 10
        for producer_id in range(100):
            table.put(-producer_id - 1, 2, 600, ())
        assert len(table) == 110 and table.producer_ids()[10:12] == [-1, -2]
        assert table.rows()[10] == (-1, 2, -1, -1, 0, 600)
        assert all(pid in table for pid in survivors)


def transactional_header(
    base_offset: int, timestamp: int, producer_id: int, epoch: int, sequence: int
) -> bytes:
    """A one-record batch header with the transactional flag (attributes 0x10)."""
    return HEADER.pack(
        base_offset, 61 - 12, 0, 2, 0, 0x10, 0, timestamp, timestamp, producer_id, epoch,
        sequence, 1,
    )  # fmt: skip


@pytest.mark.parametrize("make", [native.ProducerTable, PythonProducerTable])
def test_a_producers_open_transaction_decides_its_common_batch_and_keeps_it(make) -> None:  # noqa: ANN001
    """The table takes a transactional batch as the common one only inside its producer's
    open transaction, and a plain one only outside it; a producer whose transaction is open
    never expires; a put keeps the flag."""
    table = make()
    table.put(7, 0, 1_000, ((0, 0, 0, 1_000),))
    assert not table.try_next(transactional_header(1, 1_000, 7, 0, 1))  # it opens one
    table.set_in_transaction(7, True)
    assert table.try_next(transactional_header(1, 1_000, 7, 0, 1))
    table.commit_next()
    assert not table.try_next(header(2, 0, 1_000, 7, 0, 2))  # plain, inside it
    table.put(7, 0, 1_000, table.get(7)[2])
    assert table.try_next(transactional_header(2, 1_000, 7, 0, 2))
    assert table.remove_expired(10**9, 1) == 0
    table.set_in_transaction(7, False)
    assert table.try_next(header(2, 0, 1_000, 7, 0, 2))
    assert not table.try_next(transactional_header(2, 1_000, 7, 0, 2))
    assert table.remove_expired(10**9, 1) == 1
    with pytest.raises(KeyError):
        table.set_in_transaction(7, True)
