"""``odradek dump-log FILE...``: what segment files hold, like Kafka's ``kafka-dump-log.sh``.

Files are only read, never changed, so it is safe on a running broker's segments. Everything
valid is printed; anything corrupt is reported on stderr, naming the file and the byte it is
at, and makes the exit status 1.
"""

from __future__ import annotations

import errno
import os
from pathlib import Path

import click

from odradek.cli.batch_dump import dump_log_file
from odradek.cli.dump_output import DumpPrinter, JsonPrinter, TextPrinter
from odradek.cli.index_dump import dump_index_file
from odradek.cli.state_file_dump import dump_state_file, is_state_file
from odradek.cli.txn_index_dump import dump_txn_index_file
from odradek.storage import log_file_names as names


@click.command("dump-log")
@click.argument("files", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--print-records",
    is_flag=True,
    help="Also print each record of a .log: offset, timestamp, key, value, headers.",
)
@click.option(
    "--offsets-decoder",
    is_flag=True,
    help="Decode records as __consumer_offsets records (committed offsets, group metadata); "
    "implies --print-records.",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print one JSON object per line, its 'type' one of file, batch, entry, summary.",
)
@click.option(
    "--verify-index",
    is_flag=True,
    help="Check every entry of a .index/.timeindex against the .log of its segment.",
)
@click.pass_context
def dump_log(
    ctx: click.Context,
    files: tuple[Path, ...],
    print_records: bool,
    offsets_decoder: bool,
    as_json: bool,
    verify_index: bool,
) -> None:
    """Print the contents of segment files.

    A .log file shows its batches (with each one's producer id, epoch and sequences), an
    .index or .timeindex file its entries, a .txnindex file its aborted transactions, a
    .snapshot file the producers it holds, a leader-epoch-checkpoint where each leader epoch
    starts. Keys and values are shown as
    text when they are printable UTF-8, as a "quoted string" when they are other UTF-8 (or
    text that would read as null or a quoted form), else as escaped bytes (b'...'); null is
    shown as null. --json shows them as consume --format json does: strings when UTF-8, else
    {"base64": "..."}; headers as {"key", "value"} objects. The summary's validBytes is where
    the first bad batch starts: what a broker recovering the segment would keep.
    """
    printer = JsonPrinter() if as_json else TextPrinter()
    failed = False
    for path in files:
        problems = _dump_file(
            path, printer, print_records or offsets_decoder, verify_index, offsets_decoder
        )
        for problem in problems:
            click.echo(f"{path}: {problem}", err=True)
        failed = failed or bool(problems)
    if failed:
        ctx.exit(1)


def _dump_file(
    path: Path,
    printer: DumpPrinter,
    print_records: bool,
    verify_index: bool,
    offsets_decoder: bool = False,
) -> list[str]:
    """Dump one file as its name says it is; return its problems, or why it cannot be read."""
    txn_index = names.is_transaction_index_file(path)
    if not (
        names.is_log_file(path) or names.is_index_file(path) or txn_index or is_state_file(path)
    ):
        return [
            "not a segment file: expected a .log, .index, .timeindex, .txnindex, .snapshot or "
            "leader-epoch-checkpoint file"
        ]
    if not path.is_file():  # said before any "Dumping" line for it
        reason = os.strerror(errno.ENOENT if not path.exists() else errno.EISDIR)
        return [f"cannot read: {reason}"]
    printer.file(path)
    try:
        if names.is_log_file(path):
            return dump_log_file(path, printer, print_records, offsets_decoder)
        if is_state_file(path):
            return dump_state_file(path, printer)
        if txn_index:
            return dump_txn_index_file(path, printer)
        return dump_index_file(path, printer, verify_index)
    except OSError as error:
        return [f"cannot read: {error.strerror}"]
