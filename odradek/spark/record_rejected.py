"""The error a write fails with when the broker refuses one of its records."""

from __future__ import annotations


class RecordRejectedError(RuntimeError):
    """The broker refused a record (or the producer could not deliver it): the write fails."""
