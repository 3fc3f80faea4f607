"""Helpers for the tests of the cleaner's worker processes (no tests here): their states and
who started them, read from /proc."""

from __future__ import annotations

import time
from pathlib import Path

DEADLINE_S = 20.0
WORKER_MODULE = b"odradek.cleaner.cleaner_process"


def state(pid: int) -> str | None:
    """The process's state letter (``Z``: a zombie, exited but not waited for by its parent);
    None once it is gone."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return None


def await_state(pid: int, *states: str | None) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while state(pid) not in states:
        assert time.monotonic() < deadline, f"process {pid} is still {state(pid)}"
        time.sleep(0.01)


def await_gone(pid: int) -> None:
    """Wait until the process has exited and been waited for."""
    await_state(pid, None)


def await_dead(pid: int) -> None:
    """Wait until the process has exited (its new parent may not have waited for it yet)."""
    await_state(pid, None, "Z")


def worker_pids(parent: int) -> list[int]:
    """The running cleaner worker processes ``parent`` started."""
    pids = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
            cmdline = (stat.parent / "cmdline").read_bytes()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if int(fields[1]) == parent and WORKER_MODULE in cmdline:
            pids.append(int(stat.parent.name))
    return pids


def await_workers(parent: int, count: int) -> list[int]:
    """Wait until ``parent`` runs ``count`` cleaner workers; their process ids."""
    deadline = time.monotonic() + DEADLINE_S
    while len(pids := worker_pids(parent)) != count:
        assert time.monotonic() < deadline, f"{len(pids)} workers, not {count}"
        time.sleep(0.01)
    return pids


def resident_kib(pid: int) -> int:
    """The process's resident memory."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for process {pid}")
