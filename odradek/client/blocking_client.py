"""BlockingClient: what every sync client wrapper shares."""

from __future__ import annotations

from abc import ABC, abstractmethod
from types import TracebackType
from typing import Self


class BlockingClient(ABC):
    """A sync wrapper around an asyncio client; a context manager that closes it on exit."""

    @abstractmethod
    def close(self) -> None:
        """Release the client's resources (flushing what it holds first)."""

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()
