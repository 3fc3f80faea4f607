"""start_eagerly: run a request's coroutine now, and make a task of it only if it must wait.

Most requests (a small produce, a fetch that finds its answer at once, metadata) finish without
ever waiting. Wrapping each in a task costs a task object, a turn of the event loop and the
callbacks between them; running its first step in the caller answers it in the same turn and
costs nothing more. A coroutine that does wait is handed to a task at the point where it waits,
and continues exactly as if it had been a task from the start (Python 3.12's eager task factory
does the same). It runs in the caller's context: the server keeps no context variables. Until
it first waits there is no current task, so it must not need one (``asyncio.timeout`` does):
the connections start only the handlers of EAGER_API_KEYS so.
"""

from __future__ import annotations

import asyncio
import collections.abc
from collections.abc import Coroutine, Generator
from typing import Any


def start_eagerly(
    loop: asyncio.AbstractEventLoop, coroutine: Coroutine[Any, Any, None], name: str | None = None
) -> asyncio.Task[None] | None:
    """Run ``coroutine`` until it first waits; the task finishing it then, None if it ended.

    An exception it raises before waiting is reported to the loop's exception handler, as a
    task's unretrieved exception would be.
    """
    try:
        waiting_on = coroutine.send(None)
    except StopIteration:
        return None
    except Exception as error:  # a task would have logged it
        loop.call_exception_handler({"message": "a request handler failed", "exception": error})
        return None
    return loop.create_task(_Started(coroutine, waiting_on), name=name)


class _Started(collections.abc.Coroutine):
    """A coroutine already run to its first wait, for a task to go on with: the task's first
    step gets what it waits on; everything after, cancellation too, goes to the coroutine (so
    a task cancelled before its first step still ends the coroutine, running its ``finally``
    blocks)."""

    __slots__ = ("_coroutine", "_waiting_on")

    def __init__(self, coroutine: Coroutine[Any, Any, None], waiting_on: Any) -> None:
        self._coroutine = coroutine
        self._waiting_on = waiting_on

    def send(self, value: Any) -> Any:
        waiting_on = self._waiting_on
        if waiting_on is not _RESUMED:
            self._waiting_on = _RESUMED
            return waiting_on
        return self._coroutine.send(value)

    def throw(self, *error: Any) -> Any:
        self._waiting_on = _RESUMED
        return self._coroutine.throw(*error)

    def close(self) -> None:
        self._coroutine.close()

    def __await__(self) -> Generator[Any, Any, None]:
        raise TypeError("a started request coroutine is finished by its task, not awaited")


_RESUMED = object()
