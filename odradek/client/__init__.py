"""odradek's client library: producer, consumer and admin client.

The ``Async*`` classes are the asyncio core; ``Producer``, ``Consumer`` and ``Admin`` are their
blocking twins, running the core on one shared background event loop thread.
"""

from odradek.client.admin import Admin, AsyncAdmin, NewTopic
from odradek.client.consumer import AsyncConsumer, Consumer
from odradek.client.consumer_rebalance_listener import ConsumerRebalanceListener
from odradek.client.consumer_record import ConsumerRecord
from odradek.client.offset_lookup import OffsetAndTimestamp
from odradek.client.producer import AsyncProducer, Producer
from odradek.client.record_metadata import FutureRecordMetadata, RecordMetadata

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
