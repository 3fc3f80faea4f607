"""The C modules are bytes-in, verdict-out kernels (docs/native.md): they take buffers and
numbers and return values, and never reach into a Python object's attributes, private ones
above all (a rename on the Python side would silently change what the C does), nor into
CPython's private API (which changes between releases)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
C_SOURCES = sorted((ROOT / "odradek").rglob("*.c")) + sorted((ROOT / "odradek").rglob("*.h"))

# Any call that reads, writes or deletes an attribute by name or by a name object.
ATTRIBUTE_ACCESS = re.compile(
    r"\b(PyObject_(Get|Set|Del|Has)Attr\w*|_PyObject_LookupAttr\w*|PyObject_GenericGetAttr"
    r"|PyObject_GenericSetAttr)\s*\("
)
# A string literal naming a private attribute ("_fd", "_segments"), however it is used: the
# retired modules looked names up from tables of such strings.
PRIVATE_NAME = re.compile(r'"_[A-Za-z]\w*"')
PRIVATE_API = re.compile(r"\b_Py[A-Za-z_]\w*")
# The module names themselves, in PyModuleDef.
MODULE_NAMES = {
    '"_record_scan"',
    '"_offset_map"',
    '"_segment_append_state"',
    '"_producer_table"',
}


def code_of(path: Path) -> str:
    """The source without its comments, so that prose may name attributes."""
    text = path.read_text()
    text = re.sub(r"/\*.*?\*/", " ", text, flags=re.DOTALL)
    return re.sub(r"//[^\n]*", " ", text)


def test_there_are_c_sources_to_check() -> None:
    names = {path.name for path in C_SOURCES}
    assert {
        "_record_scan.c",
        "_segment_append_state.c",
        "_producer_table.c",
        "_offset_map.c",
        "crc32c.h",
        "siphash.h",
    } <= names


@pytest.mark.parametrize("path", C_SOURCES, ids=lambda path: path.name)
def test_no_c_module_touches_python_attributes(path: Path) -> None:
    code = code_of(path)
    assert not ATTRIBUTE_ACCESS.findall(code), f"{path.name} reads or writes attributes"
    private = set(PRIVATE_NAME.findall(code)) - MODULE_NAMES
    assert not private, f"{path.name} names private attributes: {sorted(private)}"


@pytest.mark.parametrize("path", C_SOURCES, ids=lambda path: path.name)
def test_no_c_module_calls_private_cpython_api(path: Path) -> None:
    assert not PRIVATE_API.findall(code_of(path)), f"{path.name} uses CPython's private API"


def test_the_checks_catch_what_the_retired_modules_did(tmp_path: Path) -> None:
    """The patterns above find the calls the retired append modules made."""
    sample = tmp_path / "sample.c"
    sample.write_text(
        'static const char *names[] = {"_fd", "_mmap"};\n'
        'PyObject *size = PyObject_GetAttrString(segment, "size");\n'
        "PyObject_SetAttr(log, names_high_watermark, value);\n"
        "Py_hash_t h = _Py_HashBytes(data, length); /* PyObject_GetAttr( in prose */\n"
    )
    code = code_of(sample)
    assert len(ATTRIBUTE_ACCESS.findall(code)) == 2
    assert set(PRIVATE_NAME.findall(code)) == {'"_fd"', '"_mmap"'}
    assert PRIVATE_API.findall(code) == ["_Py_HashBytes"]
