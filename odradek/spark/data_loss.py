"""Records due to be read that are gone: deleted by retention, by hand, or with their topic."""

from __future__ import annotations

import logging

logger = logging.getLogger(__name__)


class DataLossError(RuntimeError):
    """Records due to be read are gone, and the option failOnDataLoss is true."""


def report_data_loss(message: str, fail_on_data_loss: bool) -> None:
    """Raise DataLossError with ``message``, or only log it when the loss is to be skipped."""
    if fail_on_data_loss:
        raise DataLossError(
            f"{message}. Some data may have been lost: it was deleted (by retention or by hand) "
            "before it was read. Set the option failOnDataLoss to false to skip lost records "
            "instead of failing."
        )
    logger.warning("%s; skipped as failOnDataLoss is false", message)
