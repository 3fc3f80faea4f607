"""The ways a cleaning run ends early."""

from __future__ import annotations


class LogCleaningAbortedError(Exception):
    """The run was stopped on purpose (Kafka's ``LogCleaningAbortedException``): the log is
    being paused, truncated or deleted, the cleaner is shutting down, or a segment it was
    reading went away. Nothing is marked; the log is cleaned again later."""


class LogCleaningError(Exception):
    """The run failed. The log is retried after a backoff; after
    ``MAX_CLEANING_ATTEMPTS`` failures in a row it is marked uncleanable until the broker
    restarts (log_cleaner_manager.py)."""


class CleanerWorkerDiedError(LogCleaningError):
    """The worker process running the cleaning died (killed, out of memory, a crash in native
    code): the thread starts a new worker after a backoff and the log is retried."""
