"""TransactionIndex: Kafka's ``.txnindex`` format and its search, truncation and broken states.

Kafka's own files are read, and odradek's read by Kafka's DumpLogSegments, in
tests/test_kafka_reference_files.py.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from odradek.errors import CorruptIndexError
from odradek.storage.log_file_names import transaction_index_file
from odradek.storage.transaction_index import (
    ABORTED_TXN,
    AbortedTxn,
    TransactionIndex,
    TxnIndexSearchResult,
)


@pytest.fixture
def index(tmp_path: Path) -> TransactionIndex:
    return TransactionIndex(0, transaction_index_file(tmp_path, 0))


def test_the_file_name_is_kafkas(tmp_path: Path) -> None:
    assert transaction_index_file(tmp_path, 42).name == "00000000000000000042.txnindex"


def test_an_entry_is_34_big_endian_bytes_in_kafkas_field_order(index: TransactionIndex) -> None:
    index.append(
        AbortedTxn(producer_id=0x0102, first_offset=3, last_offset=9, last_stable_offset=10)
    )

    data = index.path.read_bytes()

    assert len(data) == 34
    assert data == (
        (0).to_bytes(2, "big")
        + (0x0102).to_bytes(8, "big")
        + (3).to_bytes(8, "big")
        + (9).to_bytes(8, "big")
        + (10).to_bytes(8, "big")
    )


def test_no_file_exists_until_a_transaction_is_aborted(index: TransactionIndex) -> None:
    assert index.all_aborted_txns() == []
    index.flush()
    index.reset()
    index.truncate_to(0)
    index.sanity_check()
    assert index.collect_aborted_txns(0, 100) == TxnIndexSearchResult((), False)
    assert not index.path.exists()
    assert index.delete_if_exists() is False


def test_appends_must_raise_the_last_offset(index: TransactionIndex) -> None:
    index.append(AbortedTxn(1, 0, 5, 6))
    with pytest.raises(ValueError, match="must increase"):
        index.append(AbortedTxn(2, 1, 5, 6))
    index.append(AbortedTxn(2, 1, 7, 8))
    assert [t.last_offset for t in index.all_aborted_txns()] == [5, 7]


def test_entries_survive_reopening(tmp_path: Path) -> None:
    path = transaction_index_file(tmp_path, 10)
    first = TransactionIndex(10, path)
    first.append(AbortedTxn(1, 10, 15, 16))
    first.flush()

    again = TransactionIndex(10, path)

    assert again.all_aborted_txns() == [AbortedTxn(1, 10, 15, 16)]


def test_collect_returns_the_overlapping_and_stops_at_the_last_stable_offset(
    index: TransactionIndex,
) -> None:
    # Producer 1 aborted [0, 10], producer 2 [5, 20], producer 3 [30, 40] (LSO 41 after it).
    index.append(AbortedTxn(1, 0, 10, 5))
    index.append(AbortedTxn(2, 5, 20, 21))
    index.append(AbortedTxn(3, 30, 40, 41))

    # Producer 3's LSO (41) reaches the bound: no later abort can overlap, the search ends.
    assert index.collect_aborted_txns(11, 25) == TxnIndexSearchResult(
        (AbortedTxn(2, 5, 20, 21),), True
    )
    # The first entry whose LSO reaches the upper bound completes the search.
    assert index.collect_aborted_txns(0, 21) == TxnIndexSearchResult(
        (AbortedTxn(1, 0, 10, 5), AbortedTxn(2, 5, 20, 21)), True
    )
    # A fetch past every aborted transaction still has to look at the next segment.
    assert index.collect_aborted_txns(41, 50) == TxnIndexSearchResult((), False)
    # The range's upper bound is exclusive, its lower bound inclusive.
    assert index.collect_aborted_txns(40, 41).aborted_transactions == (AbortedTxn(3, 30, 40, 41),)
    assert index.collect_aborted_txns(0, 30).aborted_transactions == (
        AbortedTxn(1, 0, 10, 5),
        AbortedTxn(2, 5, 20, 21),
    )


def test_truncate_to_drops_the_transactions_whose_marker_is_at_or_after(
    index: TransactionIndex,
) -> None:
    for n, last in enumerate((5, 10, 15)):
        index.append(AbortedTxn(n, last - 2, last, last + 1))

    index.truncate_to(10)

    assert [t.last_offset for t in index.all_aborted_txns()] == [5]
    assert index.path.stat().st_size == 34
    # The last offset went back with the entries: 6 is now above the last one kept.
    index.append(AbortedTxn(9, 6, 6, 7))
    index.truncate_to(100)
    assert [t.last_offset for t in index.all_aborted_txns()] == [5, 6]


def test_reset_empties_the_index_and_forgets_the_last_offset(index: TransactionIndex) -> None:
    index.append(AbortedTxn(1, 0, 50, 51))

    index.reset()

    assert index.all_aborted_txns() == []
    index.append(AbortedTxn(1, 0, 3, 4))
    assert index.all_aborted_txns() == [AbortedTxn(1, 0, 3, 4)]


def test_a_torn_tail_is_not_read(index: TransactionIndex) -> None:
    index.append(AbortedTxn(1, 0, 5, 6))
    with open(index.path, "ab") as file:
        file.write(AbortedTxn(2, 1, 9, 10).to_bytes()[:20])

    assert index.all_aborted_txns() == [AbortedTxn(1, 0, 5, 6)]
    assert index.collect_aborted_txns(0, 100).aborted_transactions == (AbortedTxn(1, 0, 5, 6),)


def test_sanity_check_refuses_an_entry_ending_before_the_segment(tmp_path: Path) -> None:
    index = TransactionIndex(100, transaction_index_file(tmp_path, 100))
    index.append(AbortedTxn(1, 90, 99, 100))

    with pytest.raises(CorruptIndexError, match="less than the segment's start offset 100"):
        index.sanity_check()


def test_an_entry_of_a_later_version_is_refused_with_where_it_is(index: TransactionIndex) -> None:
    index.append(AbortedTxn(1, 0, 5, 6))
    with open(index.path, "ab") as file:
        file.write(ABORTED_TXN.pack(1, 2, 6, 8, 9))

    with pytest.raises(CorruptIndexError, match="version 1 at byte 34"):
        index.all_aborted_txns()


def test_rename_moves_the_file_and_the_index_follows(tmp_path: Path) -> None:
    index = TransactionIndex(0, transaction_index_file(tmp_path, 0))
    index.append(AbortedTxn(1, 0, 5, 6))
    deleted = tmp_path / (index.path.name + ".deleted")

    index.rename_to(deleted)

    assert not transaction_index_file(tmp_path, 0).exists()
    assert index.path == deleted
    assert index.all_aborted_txns() == [AbortedTxn(1, 0, 5, 6)]
    assert index.delete_if_exists() is True
    assert not deleted.exists()


def test_rename_of_an_index_with_no_file_only_moves_its_name(tmp_path: Path) -> None:
    index = TransactionIndex(0, transaction_index_file(tmp_path, 0))
    swap = tmp_path / "00000000000000000000.txnindex.swap"

    index.rename_to(swap)
    index.append(AbortedTxn(1, 0, 5, 6))

    assert os.listdir(tmp_path) == [swap.name]
