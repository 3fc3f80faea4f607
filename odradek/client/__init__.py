"""odradek's client library: producer, consumer and admin client.

The ``Async*`` classes are the asyncio core; ``Producer``, ``Consumer`` and ``Admin`` are their
blocking twins, running the core on one shared background event loop thread.

The names below are imported on first use, so that a process needing one part of the client
(a Spark worker checking a producer's settings in ``odradek.client.config``) does not load all
of it: importing the whole client costs a fresh interpreter about 0.3 s of CPU.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from odradek.client.admin import Admin, AsyncAdmin, NewTopic
    from odradek.client.consumer import AsyncConsumer, Consumer
    from odradek.client.consumer_rebalance_listener import ConsumerRebalanceListener
    from odradek.client.consumer_record import ConsumerRecord
    from odradek.client.offset_lookup import OffsetAndTimestamp
    from odradek.client.producer import AsyncProducer, Producer
    from odradek.client.record_metadata import FutureRecordMetadata, RecordMetadata

_MODULES = {
    "Admin": "admin",
    "AsyncAdmin": "admin",
    "NewTopic": "admin",
    "AsyncConsumer": "consumer",
    "Consumer": "consumer",
    "ConsumerRebalanceListener": "consumer_rebalance_listener",
    "ConsumerRecord": "consumer_record",
    "OffsetAndTimestamp": "offset_lookup",
    "AsyncProducer": "producer",
    "Producer": "producer",
    "FutureRecordMetadata": "record_metadata",
    "RecordMetadata": "record_metadata",
}

__all__ = [
    "Admin",
    "AsyncAdmin",
    "AsyncConsumer",
    "AsyncProducer",
    "Consumer",
    "ConsumerRebalanceListener",
    "ConsumerRecord",
    "FutureRecordMetadata",
    "NewTopic",
    "OffsetAndTimestamp",
    "Producer",
    "RecordMetadata",
]


def __getattr__(name: str) -> Any:
    """Import the module that defines ``name`` the first time it is asked for."""
    module = _MODULES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(import_module(f"{__name__}.{module}"), name)
    globals()[name] = value
    return value
