"""DurableAnswer: a one-partition acks=all produce appended at once, answered once fsync'ed.

Protocol-neutral: each protocol reads its request and writes its response bytes (the success
response here, the error one when the flush fails or times out); the append
(``ReplicaManager.append_durably_at_once``), the wait (the partition's group commit) and the
queue of answers in request order (DurableAnswerConnection) are shared.
"""

from __future__ import annotations

from collections.abc import Callable

from odradek.server.partition import Partition


class DurableAnswer:
    """What a protocol's immediate path gives for a produce of one partition at acks=all
    whose append is done (KafkaRequestHandler.answer_at_once, MsgpackConnection's
    ``_answer_at_once``): the success response (``response``, the general path's bytes, and
    the request's ``version`` and ``correlation_id``, for the error response), and where to
    wait (``partition``, up to ``last_offset``) before it may go out.

    The connection keeps it in its queue of answers waiting for their fsync (in request order)
    and registers it with the partition's group commit, which calls it with the flush's
    outcome; ``failed`` is set then (an error, or a timeout after ``timeout_ms``), and the
    response becomes the protocol's error response. No task, no future, no response object:
    the acks=all twin of the acks 0/1 immediate answer.
    """

    __slots__ = (
        "response",
        "version",
        "correlation_id",
        "topic",
        "partition_index",
        "partition",
        "last_offset",
        "timeout_ms",
        "size",
        "received",
        "deadline",
        "done",
        "failed",
        "on_done",
    )

    def __init__(
        self,
        response: bytes,
        version: int,
        correlation_id: int,
        topic: str,
        partition_index: int,
        partition: Partition,
        last_offset: int,
        timeout_ms: int,
    ) -> None:
        self.response = response
        self.version = version
        self.correlation_id = correlation_id
        self.topic = topic
        self.partition_index = partition_index
        self.partition = partition
        self.last_offset = last_offset
        self.timeout_ms = timeout_ms
        self.size = 0
        """The request's bytes (its memory reservation), set by the connection."""
        self.received = 0.0
        """When it arrived, by ``perf_counter``, set by the connection."""
        self.deadline = 0.0
        """Loop time after which it is answered REQUEST_TIMED_OUT, set by the connection."""
        self.done = False
        self.failed: BaseException | None = None
        self.on_done: Callable[[], None] | None = None

    def __call__(self, error: BaseException | None) -> None:
        """The flush covering it ended (with ``error``, or None): it may be answered."""
        if self.done:
            return  # timed out first
        self.done = True
        self.failed = error
        if self.on_done is not None:
            self.on_done()
