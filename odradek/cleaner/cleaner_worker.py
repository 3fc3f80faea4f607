"""The cleaner's worker process: runs the cleaning tasks of one cleaner thread, one at a time,
for as long as that thread lives (``python -m odradek.cleaner.cleaner_worker``, started by
:class:`~odradek.cleaner.cleaner_process.CleanerProcess`).

A fresh interpreter that imports the cleaner and nothing else: none of the broker's server
stack, whatever the broker's ``__main__`` is. It reads pickled :class:`CleaningTask` values
from one pipe and answers each with a :class:`CleaningResult` or the run's failure on another;
it exits when the task pipe is closed, and is killed with the broker (the parent-death signal,
on Linux). Its lifetime belongs to the broker, so it ignores SIGINT and SIGTERM sent to the
whole process group (a Ctrl-C, a service manager) and is stopped by its cleaner thread.

Each run's offset map is allocated for the run and freed at its end, so the worker's memory
stays at its imports plus the largest map a run needs (at most the thread's share of
``log.cleaner.dedupe.buffer.size``).
"""

from __future__ import annotations

import ctypes
import os
import signal
import sys
import traceback
from multiprocessing.connection import Connection

from odradek.cleaner.cleaner import Cleaner
from odradek.cleaner.cleaning_result import CleaningResult
from odradek.cleaner.cleaning_task import CleaningTask
from odradek.cleaner.errors import LogCleaningAbortedError, LogCleaningError
from odradek.cleaner.throttler import Throttler

NICENESS = 19
"""The lowest CPU priority: the worker only gets CPU time the broker does not want."""
PR_SET_PDEATHSIG = 1


def main(arguments: list[str]) -> None:
    """``TASKS_FD RESULTS_FD PARENT_PID``: serve tasks until the task pipe closes."""
    tasks_fd, results_fd, parent_pid = (int(argument) for argument in arguments)
    die_with(parent_pid)
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, signal.SIG_IGN)
    os.nice(NICENESS)
    tasks = Connection(tasks_fd, writable=False)
    results = Connection(results_fd, readable=False)
    throttler: Throttler | None = None
    while True:
        try:
            task = tasks.recv()
        except EOFError:
            return
        if throttler is None or throttler.desired_rate_per_sec != task.io_bytes_per_second:
            throttler = Throttler(task.io_bytes_per_second)
        results.send(run(task, throttler))


def run(task: CleaningTask, throttler: Throttler) -> CleaningResult | Exception:
    """Clean as ``task`` says: the result, or the failure to send back instead.

    ``throttler`` lives as long as the worker, as Kafka's does: it checks the I/O rate every
    300 ms, so one made per run would never hold back runs shorter than that, and
    ``log.cleaner.io.max.bytes.per.second`` would not bound a cleaner going through many
    small logs."""
    try:
        return Cleaner(task, throttler).clean()
    except LogCleaningAbortedError as error:
        return error
    except Exception:
        return LogCleaningError(
            f"[{task.topic_partition}] cleaning failed:\n{traceback.format_exc()}"
        )


def die_with(parent_pid: int) -> None:
    """Be killed when the thread that started this process ends, as when the broker is
    killed: a run must not go on writing into log directories a restarted broker recovers."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent_pid:  # the parent died before the signal was asked for
        os._exit(1)


if __name__ == "__main__":
    main(sys.argv[1:])
