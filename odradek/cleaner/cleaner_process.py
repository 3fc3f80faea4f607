"""CleanerProcess: the worker process in which a cleaner thread runs its :class:`Cleaner`, so
the broker's event loop and threads never wait on the cleaner's CPU-bound work (SPEC 11).

Both halves live here: :class:`CleanerProcess`, the thread's handle on its worker, and
:func:`main`, the worker itself (``python -m odradek.cleaner.cleaner_process``).

The worker is a fresh interpreter, started once per cleaner thread: a run costs one pickled
task down a pipe and one result back, not a process start. It imports only the cleaner, where
a multiprocessing child re-imports the parent's ``__main__`` (for the broker, the whole server
stack: about 150 ms of CPU a run). It runs at the lowest CPU priority: on a small machine a
busy worker would otherwise take CPU time the broker's event loop needs (the I/O it does is
throttled by ``log.cleaner.io.max.bytes.per.second``).

It reads pickled :class:`CleaningTask` values from one pipe and answers each with a
:class:`CleaningResult` or the run's failure on another; it exits when the task pipe is
closed, and is killed with the broker (the parent-death signal, on Linux). Its lifetime
belongs to the broker, so it ignores SIGINT and SIGTERM sent to the whole process group (a
Ctrl-C, a service manager) and is stopped by its cleaner thread. Each run's offset map is
allocated for the run and freed at its end, so the worker's memory stays at its imports plus
the largest map a run needs (at most the thread's share of ``log.cleaner.dedupe.buffer.size``).

An aborted run kills the worker (there is no safe point to interrupt it at); a worker that was
killed or died is replaced by a fresh one for the next run.
"""

from __future__ import annotations

import ctypes
import logging
import os
import signal
import subprocess
import sys
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection

from odradek.cleaner.cleaner import Cleaner
from odradek.cleaner.cleaning_task import CleaningResult, CleaningTask
from odradek.cleaner.errors import (
    CleanerWorkerDiedError,
    LogCleaningAbortedError,
    LogCleaningError,
)
from odradek.cleaner.throttler import Throttler

logger = logging.getLogger(__name__)

POLL_INTERVAL_S = 0.1
STOP_TIMEOUT_S = 5.0
WORKER_MODULE = "odradek.cleaner.cleaner_process"
"""What the worker runs (``python -m``); this module's name even where it runs as __main__."""
NICENESS = 19
"""The lowest CPU priority: the worker only gets CPU time the broker does not want."""
PR_SET_PDEATHSIG = 1


class CleanerProcess:
    """The worker process of one cleaner thread, started by :meth:`start` (or the first
    :meth:`clean`) and stopped by :meth:`stop`. Start it from the thread that uses it: the
    worker is killed when the thread that started it ends (so that it dies with the broker)."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None
        self._tasks: Connection | None = None
        self._results: Connection | None = None
        self.idle_deaths = 0  # workers found dead between runs (and replaced), in all

    @property
    def pid(self) -> int | None:
        """The running worker's process id; None when there is none."""
        return None if self._process is None else self._process.pid

    def start(self) -> None:
        """Start a worker, unless one is running (one that exited is reaped and replaced)."""
        self._running()

    def _running(self) -> tuple[Connection, Connection]:
        """The running worker's task and result pipes, starting a worker if need be."""
        if self._process is not None and self._process.poll() is None:
            return self._tasks, self._results
        if self._process is not None:
            self.idle_deaths += 1
            logger.error(
                "the cleaner worker process %d died between runs (%s); starting a new one",
                self._process.pid,
                _exit_description(self._process.returncode),
            )
        self._end(0)
        tasks_read, tasks_write = os.pipe()
        results_read, results_write = os.pipe()
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-m", WORKER_MODULE]
                + [str(tasks_read), str(results_write), str(os.getpid())],
                stdin=subprocess.DEVNULL,
                pass_fds=(tasks_read, results_write),
            )
        except BaseException:
            os.close(tasks_write)
            os.close(results_read)
            raise
        finally:
            os.close(tasks_read)
            os.close(results_write)
        self._tasks = Connection(tasks_write, readable=False)
        self._results = Connection(results_read, writable=False)
        return self._tasks, self._results

    def clean(
        self,
        task: CleaningTask,
        should_abort: Callable[[], bool],
        poll_interval_s: float = POLL_INTERVAL_S,
    ) -> CleaningResult:
        """Have the worker carry out ``task``. Raises LogCleaningAbortedError when
        ``should_abort()`` turns True first (the worker is killed) and LogCleaningError when
        the run failed or the worker died."""
        tasks, results = self._running()
        try:
            tasks.send(task)
            while not results.poll(poll_interval_s):
                if should_abort():
                    raise LogCleaningAbortedError(f"[{task.topic_partition}] cleaning aborted")
            outcome = results.recv()
        except (EOFError, BrokenPipeError):
            pid = self.pid
            how = _exit_description(self._end(STOP_TIMEOUT_S))
            raise CleanerWorkerDiedError(
                f"[{task.topic_partition}] the cleaner worker process {pid} died ({how})"
            ) from None
        except BaseException:
            self._end(0)
            raise
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def stop(self, timeout_s: float = STOP_TIMEOUT_S) -> None:
        """Let the worker finish: close its task pipe, which ends it once it is idle; it is
        killed if it has not ended after ``timeout_s``."""
        if self._tasks is not None:
            self._tasks.close()
        self._end(timeout_s)

    def _end(self, timeout_s: float) -> int | None:
        """Wait up to ``timeout_s`` for the worker to exit, kill it if it has not, reap it (no
        zombie) and close the pipes; its exit code, None when there was no worker."""
        process, self._process = self._process, None
        if process is None:
            return None
        try:
            process.wait(timeout_s)
        except subprocess.TimeoutExpired:
            process.kill()
        exit_code = process.wait()
        self._tasks.close()
        self._results.close()
        return exit_code


def _exit_description(exit_code: int | None) -> str:
    """``killed by SIGKILL`` or ``exit code 1``, from a Popen return code."""
    if exit_code is not None and exit_code < 0:
        try:
            return f"killed by {signal.Signals(-exit_code).name}"
        except ValueError:
            return f"killed by signal {-exit_code}"
    return f"exit code {exit_code}"


# --- the worker ----------------------------------------------------------------------------


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
    except Exception as error:
        return LogCleaningError(
            f"[{task.topic_partition}] cleaning failed: {type(error).__name__}: {error}\n"
            f"{traceback.format_exc()}"
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
