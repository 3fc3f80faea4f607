"""What a partition's state files hold, for ``odradek dump-log``: producer snapshots
(``<offset>.snapshot``, as kafka-dump-log prints them) and the ``leader-epoch-checkpoint``."""

from __future__ import annotations

from pathlib import Path

from odradek.cli.dump_output import DumpPrinter
from odradek.storage.batch_metadata import decrease_sequence
from odradek.storage.leader_epoch_file_cache import LEADER_EPOCH_CHECKPOINT_FILE, decode_checkpoint
from odradek.storage.producer_snapshot_file import (
    CorruptSnapshotError,
    is_snapshot_file,
    read_snapshot,
)


def is_state_file(path: Path) -> bool:
    return is_snapshot_file(path.name) or path.name == LEADER_EPOCH_CHECKPOINT_FILE


def dump_state_file(path: Path, printer: DumpPrinter) -> list[str]:
    """Print a snapshot's producers or a checkpoint's epochs; the file's problems."""
    if is_snapshot_file(path.name):
        try:
            entries = read_snapshot(path)
        except CorruptSnapshotError as error:
            return [str(error)]
        for entry in entries:
            printer.entry(
                {
                    "producerId": entry.producer_id,
                    "producerEpoch": entry.producer_epoch,
                    "coordinatorEpoch": entry.coordinator_epoch,
                    "currentTxnFirstOffset": entry.current_txn_first_offset,
                    "lastTimestamp": entry.timestamp,
                    "firstSequence": decrease_sequence(entry.last_sequence, entry.offset_delta),
                    "lastSequence": entry.last_sequence,
                    "lastOffset": entry.last_offset,
                    "offsetDelta": entry.offset_delta,
                }
            )
        printer.summary({"producers": len(entries)})
        return []
    try:
        epochs = decode_checkpoint(path.read_text())
    except (ValueError, UnicodeDecodeError) as error:
        return [f"not a leader-epoch-checkpoint: {error}"]
    for epoch in epochs:
        printer.entry({"epoch": epoch.epoch, "startOffset": epoch.start_offset})
    printer.summary({"epochs": len(epochs)})
    return []
