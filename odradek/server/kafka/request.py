"""KafkaRequest: one decoded Kafka-protocol request, and what its handlers share: the handler
type, and how a handler calling a manager with Kafka's data authorizes its topics."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol, TypeVar

from odradek.config.config_entry import ConfigEntry
from odradek.errors import KafkaError
from odradek.protocol.kafka import api_versions as apis
from odradek.server.request_context import RequestContext

if TYPE_CHECKING:
    from odradek.server.apis import ApiRouter

E = TypeVar("E")
T = TypeVar("T")

KafkaHandler = Callable[["KafkaRequest", RequestContext], Awaitable[Any]]
"""Answers one Kafka API: the response's fields, or None when there is none (acks=0)."""

TopicConfigsLookup = Callable[[RequestContext, str], list[ConfigEntry] | KafkaError]
"""A topic's configs as its principal may describe them (KafkaConfigApis.topic_configs)."""

LEADER_EPOCH = 0
"""The partition leader epoch of every partition: the single broker leads each partition in
epoch 0 for ever (docs/kafka-compatibility.md, "Leader epochs")."""


class KafkaRequest(NamedTuple):
    """A decoded request: its header and body, or why it is refused (``refusal``)."""

    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None = None
    body: Any = None  # a dict of fields; a KafkaProduceRequest or KafkaFetchRequest
    refusal: KafkaError | None = None

    def __str__(self) -> str:
        client = f" of client {self.client_id!r}" if self.client_id else ""
        name = apis.api_name(self.api_key)
        return f"{name} v{self.api_version} request {self.correlation_id}{client}"


async def handle_permitted(
    router: ApiRouter,
    context: RequestContext,
    api_key: int,
    topics: Sequence[str],
    entries: Sequence[E],
    handle: Callable[[list[E]], Awaitable[Sequence[T]]],
) -> list[T | KafkaError]:
    """``handle``'s outcome for each of ``entries`` (of the topics ``topics``, one each) that
    the principal may touch in a request of ``api_key`` (ApiAuthorization's rule for it, the
    one the msgpack protocol's requests meet in ApiRouter), and the refusal of the others,
    in order; their errors counted as ApiRouter counts them."""
    denials = router.authorization.topic_denials(context, api_key, topics)
    outcomes: list[T | KafkaError] = [denial for denial in denials if denial is not None]
    allowed = [entry for entry, denial in zip(entries, denials, strict=True) if denial is None]
    if allowed:
        handled = iter(await handle(allowed))
        refused = iter(outcomes)
        outcomes = [next(handled) if denial is None else next(refused) for denial in denials]
    router.count_entry_errors(api_key, (o.code for o in outcomes if isinstance(o, KafkaError)))
    return outcomes


class _PartitionEntry(Protocol):
    topic: str


class _PartitionResult(Protocol):
    error: int


P = TypeVar("P", bound=_PartitionEntry)
R = TypeVar("R", bound=_PartitionResult)


def handle_permitted_partitions(
    router: ApiRouter,
    context: RequestContext,
    api_key: int,
    entries: Sequence[P],
    handle: Callable[[Sequence[P]], Awaitable[list[R] | None]],
    refuse: Callable[[P, KafkaError], R],
) -> Awaitable[list[R] | None]:
    """``handle``'s result for each partition of ``entries`` the principal may touch in a
    request of ``api_key`` (ApiAuthorization's rule for it, the one the msgpack protocol's
    Produce and Fetch meet in ApiRouter), ``refuse``'s for the others, in order; None when
    ``handle`` answers None (acks=0). Every result's error is counted as ApiRouter counts
    them."""
    authorization = router.authorization
    if authorization.authorizer.enabled:
        denials = authorization.topic_denials(context, api_key, [e.topic for e in entries])
        if any(denials):
            return _handle_allowed(router, api_key, entries, denials, handle, refuse)
    return _counted(router, api_key, handle(entries))


async def _counted(
    router: ApiRouter, api_key: int, handling: Awaitable[list[R] | None]
) -> list[R] | None:
    results = await handling
    if results is not None:
        for result in results:
            if result.error:
                router.count_entry_errors(api_key, (r.error for r in results))
                break
    return results


async def _handle_allowed(
    router: ApiRouter,
    api_key: int,
    entries: Sequence[P],
    denials: list[KafkaError | None],
    handle: Callable[[Sequence[P]], Awaitable[list[R] | None]],
    refuse: Callable[[P, KafkaError], R],
) -> list[R] | None:
    allowed = [entry for entry, denial in zip(entries, denials, strict=True) if denial is None]
    handled = await handle(allowed)
    if handled is None:
        return None  # acks=0: nothing is answered either way
    answers = iter(handled)
    results = [
        next(answers) if denial is None else refuse(entry, denial)
        for entry, denial in zip(entries, denials, strict=True)
    ]
    router.count_entry_errors(api_key, (r.error for r in results))
    return results
