"""What a ``.txnindex`` holds, for ``odradek dump-log``: its aborted transactions, with
Kafka's field names (as kafka-dump-log prints them)."""

from __future__ import annotations

from pathlib import Path

from odradek.cli.dump_output import DumpPrinter
from odradek.errors import CorruptIndexError
from odradek.storage import log_file_names as names
from odradek.storage.transaction_index import ABORTED_TXN, TransactionIndex


def dump_txn_index_file(path: Path, printer: DumpPrinter) -> list[str]:
    """Print each aborted transaction; the file's problems (a torn tail, an unknown version)."""
    base = path.name.split(".", 1)[0]
    try:
        start = names.offset_from_file_name(base)
    except ValueError:
        start = 0
    try:
        entries = TransactionIndex(start, path).all_aborted_txns()
    except CorruptIndexError as error:
        return [error.message]
    for entry in entries:
        printer.entry(
            {
                "version": entry.version,
                "producerId": entry.producer_id,
                "firstOffset": entry.first_offset,
                "lastOffset": entry.last_offset,
                "lastStableOffset": entry.last_stable_offset,
            }
        )
    printer.summary({"abortedTransactions": len(entries)})
    torn = path.stat().st_size % ABORTED_TXN.size
    if torn:
        return [f"{torn} trailing bytes at byte {path.stat().st_size - torn} are not a whole entry"]
    return []
