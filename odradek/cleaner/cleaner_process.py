"""CleanerProcess: one cleaning run in a child process, so the broker's event loop and threads
never wait on the cleaner's CPU-bound Python (SPEC 11).

The child is forked from a fork server that has the cleaner imported (cheap, and safe in a
threaded parent) and runs :class:`Cleaner` over the task's files; the parent only waits on a
pipe, checking every ``poll_interval_s`` whether it should kill the child instead. The child
runs at the lowest CPU priority: on a small machine a busy child would otherwise take CPU
time the broker's event loop needs, and show as event-loop lag (the I/O it does is throttled
by ``log.cleaner.io.max.bytes.per.second``).
"""

from __future__ import annotations

import multiprocessing
import os
import traceback
from collections.abc import Callable
from multiprocessing.connection import Connection

from odradek.cleaner.cleaner import Cleaner
from odradek.cleaner.cleaning_result import CleaningResult
from odradek.cleaner.cleaning_task import CleaningTask
from odradek.cleaner.errors import LogCleaningAbortedError, LogCleaningError

START_METHOD = "forkserver"
POLL_INTERVAL_S = 0.1
NICENESS = 19


class CleanerProcess:
    """A started child process cleaning one log; :meth:`result` waits for it."""

    def __init__(self, task: CleaningTask) -> None:
        context = multiprocessing.get_context(START_METHOD)
        context.set_forkserver_preload([Cleaner.__module__])
        self.task = task
        self._receiver, sender = context.Pipe(duplex=False)
        self._process = context.Process(
            target=run_cleaning,
            args=(task, sender),
            name=f"log-cleaner-{task.topic_partition}",
            daemon=True,
        )
        self._process.start()
        sender.close()

    @property
    def pid(self) -> int | None:
        return self._process.pid

    def result(
        self, should_abort: Callable[[], bool], poll_interval_s: float = POLL_INTERVAL_S
    ) -> CleaningResult:
        """The run's result. Raises LogCleaningAbortedError when ``should_abort()`` turns True
        first (the child is killed) and LogCleaningError when the run failed or the child died.
        Either way the child is gone on return."""
        try:
            while not self._receiver.poll(poll_interval_s):
                if should_abort():
                    raise LogCleaningAbortedError(f"[{self.task.topic_partition}] cleaning aborted")
            outcome = self._receiver.recv()
        except EOFError:
            self._process.join()
            raise LogCleaningError(
                f"[{self.task.topic_partition}] the cleaning process {self.pid} died "
                f"(exit code {self._process.exitcode})"
            ) from None
        finally:
            self.stop()
        if isinstance(outcome, Exception):
            raise outcome
        return outcome

    def stop(self) -> None:
        """Kill the child if it is still running and release it."""
        if self._process.is_alive():
            self._process.kill()
        self._process.join()
        self._receiver.close()


def run_cleaning(task: CleaningTask, sender: Connection) -> None:
    """The child's body: clean, then send the result or the failure back."""
    os.nice(NICENESS)
    outcome: CleaningResult | Exception
    try:
        outcome = Cleaner(task).clean()
    except LogCleaningAbortedError as error:
        outcome = error
    except Exception:
        outcome = LogCleaningError(
            f"[{task.topic_partition}] cleaning failed:\n{traceback.format_exc()}"
        )
    sender.send(outcome)
    sender.close()
