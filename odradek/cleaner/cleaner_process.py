"""CleanerProcess: a cleaner thread's long-lived worker process, so the broker's event loop and
threads never wait on the cleaner's CPU-bound work (SPEC 11).

The worker (cleaner_worker.py) is a fresh interpreter, started once per cleaner thread: a
run costs one pickled task down a pipe and one result back, not a process start. It imports
only the cleaner, where a multiprocessing child re-imports the parent's ``__main__`` (for the
broker, the whole server stack: about 150 ms of CPU a run). It runs at the lowest CPU
priority: on a small machine a busy worker would otherwise take CPU time the broker's event
loop needs (the I/O it does is throttled by ``log.cleaner.io.max.bytes.per.second``).

An aborted run kills the worker (there is no safe point to interrupt it at); a worker that was
killed or died is replaced by a fresh one for the next run.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from multiprocessing.connection import Connection

from odradek.cleaner import cleaner_worker
from odradek.cleaner.cleaning_result import CleaningResult
from odradek.cleaner.cleaning_task import CleaningTask
from odradek.cleaner.errors import LogCleaningAbortedError, LogCleaningError

POLL_INTERVAL_S = 0.1
STOP_TIMEOUT_S = 5.0


class CleanerProcess:
    """The worker process of one cleaner thread, started by :meth:`start` (or the first
    :meth:`clean`) and stopped by :meth:`stop`. Start it from the thread that uses it: the
    worker is killed when the thread that started it ends (so that it dies with the broker)."""

    def __init__(self) -> None:
        self._process: subprocess.Popen[bytes] | None = None
        self._tasks: Connection | None = None
        self._results: Connection | None = None

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
        self._end(0)
        tasks_read, tasks_write = os.pipe()
        results_read, results_write = os.pipe()
        try:
            self._process = subprocess.Popen(
                [sys.executable, "-m", cleaner_worker.__name__]
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
            raise LogCleaningError(
                f"[{task.topic_partition}] the cleaner worker process {pid} died "
                f"(exit code {self._end(STOP_TIMEOUT_S)})"
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
