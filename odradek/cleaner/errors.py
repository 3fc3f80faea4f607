"""The ways a cleaning run ends early."""

from __future__ import annotations


class LogCleaningAbortedError(Exception):
    """The run was stopped on purpose (Kafka's ``LogCleaningAbortedException``): the log is
    being paused, truncated or deleted, the cleaner is shutting down, or a segment it was
    reading went away. Nothing is marked; the log is cleaned again later."""


class LogCleaningError(Exception):
    """The run failed; the log is marked uncleanable until the broker restarts."""
