"""``dump-log``'s display of record bytes: no two byte strings look alike in its text, and a
file that is not there is said before anything is dumped."""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner, Result
from log_helpers import BASE_TIME_MS

from odradek.cli.main import cli
from odradek.record.record_batch_builder import build_batch
from odradek.storage import log_file_names as names


def dump(*args: object) -> Result:
    return CliRunner().invoke(cli, ["dump-log", *map(str, args)])


def test_text_tells_apart_keys_that_would_look_alike(tmp_path: Path) -> None:
    log_file = names.log_file(tmp_path, 0)
    keys = [b"b'\\x00'", b"\x00", b"null", None, b"", b"plain", b"a\tb"]
    log_file.write_bytes(build_batch([(BASE_TIME_MS, key, b"v", []) for key in keys]))

    result = dump("--print-records", log_file)

    shown = [
        line.split(" key: ", 1)[1].split(" value: ", 1)[0]
        for line in result.stdout.splitlines()
        if line.startswith("| ")
    ]
    assert shown == ['"b\'\\\\x00\'"', "b'\\x00'", '"null"', "null", '""', "plain", '"a\\tb"']
    assert len(set(shown)) == len(keys)


def test_a_missing_file_is_an_error_before_any_dumping_line(tmp_path: Path) -> None:
    present = names.log_file(tmp_path, 0)
    present.write_bytes(build_batch([(BASE_TIME_MS, b"k", b"v", [])]))
    missing = names.log_file(tmp_path, 100)

    result = dump(missing, present)

    assert result.exit_code == 1
    assert result.stderr == f"{missing}: cannot read: No such file or directory\n"
    assert str(missing) not in result.stdout
    assert result.stdout.startswith(f"Dumping {present}\n")
