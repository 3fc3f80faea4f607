"""Segment file names and temporary suffixes of Kafka's on-disk layout (design §2)."""

from __future__ import annotations

from pathlib import Path

LOG_FILE_SUFFIX = ".log"
INDEX_FILE_SUFFIX = ".index"
TIME_INDEX_FILE_SUFFIX = ".timeindex"
TXN_INDEX_FILE_SUFFIX = ".txnindex"
DELETED_FILE_SUFFIX = ".deleted"
CLEANED_FILE_SUFFIX = ".cleaned"
SWAP_FILE_SUFFIX = ".swap"


def filename_prefix_from_offset(offset: int) -> str:
    """The 20-digit zero-padded base offset every file of a segment is named by."""
    return f"{offset:020d}"


def log_file(directory: Path, offset: int, suffix: str = "") -> Path:
    return directory / f"{filename_prefix_from_offset(offset)}{LOG_FILE_SUFFIX}{suffix}"


def offset_index_file(directory: Path, offset: int, suffix: str = "") -> Path:
    return directory / f"{filename_prefix_from_offset(offset)}{INDEX_FILE_SUFFIX}{suffix}"


def time_index_file(directory: Path, offset: int, suffix: str = "") -> Path:
    return directory / f"{filename_prefix_from_offset(offset)}{TIME_INDEX_FILE_SUFFIX}{suffix}"


def transaction_index_file(directory: Path, offset: int, suffix: str = "") -> Path:
    return directory / f"{filename_prefix_from_offset(offset)}{TXN_INDEX_FILE_SUFFIX}{suffix}"


def offset_from_file_name(name: str) -> int:
    """The base offset a segment file is named by (``00000000000000000042.log.swap`` -> 42)."""
    prefix = name.split(".", 1)[0]
    if len(prefix) != 20 or not prefix.isdigit():
        raise ValueError(f"{name!r} is not named by a 20-digit base offset")
    return int(prefix)


def strip_suffix(path: Path, suffix: str) -> Path:
    """``path`` without a trailing temporary ``suffix`` (``x.log.swap`` -> ``x.log``)."""
    name = path.name
    if not name.endswith(suffix):
        raise ValueError(f"{path} does not end with {suffix}")
    return path.with_name(name[: -len(suffix)])


def is_index_file(path: Path) -> bool:
    """Whether ``path`` (any temp suffix stripped) is an offset or time index file."""
    base = path.name
    for suffix in (DELETED_FILE_SUFFIX, CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
    return base.endswith(INDEX_FILE_SUFFIX) or base.endswith(TIME_INDEX_FILE_SUFFIX)


def is_transaction_index_file(path: Path) -> bool:
    """Whether ``path`` (any temp suffix stripped) is a segment's ``.txnindex`` file."""
    base = path.name
    for suffix in (DELETED_FILE_SUFFIX, CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
    return base.endswith(TXN_INDEX_FILE_SUFFIX)


def is_log_file(path: Path) -> bool:
    """Whether ``path`` (any temp suffix stripped) is a segment's ``.log`` file."""
    base = path.name
    for suffix in (DELETED_FILE_SUFFIX, CLEANED_FILE_SUFFIX, SWAP_FILE_SUFFIX):
        if base.endswith(suffix):
            base = base[: -len(suffix)]
    return base.endswith(LOG_FILE_SUFFIX)
