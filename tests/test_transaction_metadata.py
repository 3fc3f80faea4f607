"""TransactionMetadata's transitions: epochs, fencing, retries, producer id rotation, refusals.

The whole happy path is replayed against Kafka's own __transaction_state records in
tests/test_kafka_reference_files.py; these are the paths a clean run does not take.
"""

from __future__ import annotations

import pytest

from odradek.errors import ProducerFencedError
from odradek.int_limits import INT16_MAX
from odradek.server.transaction.transaction_metadata import (
    TransactionMetadata,
    TxnTransitMetadata,
    is_epoch_exhausted,
)
from odradek.server.transaction.transaction_state import TransactionState
from odradek.topic_partition import TopicPartition

S = TransactionState
ORDERS = frozenset({TopicPartition("orders", 0)})
TV2 = 2


def step(metadata: TransactionMetadata, transit: TxnTransitMetadata) -> TransactionMetadata:
    metadata.complete_transition(transit)
    return metadata


def initialised(epoch: int = 0) -> TransactionMetadata:
    metadata = TransactionMetadata("app", 10, epoch - 1, 60000)
    return step(metadata, metadata.prepare_increment_producer_epoch(60000, None, 1000))


def ongoing(epoch: int = 0) -> TransactionMetadata:
    metadata = initialised(epoch)
    return step(metadata, metadata.prepare_add_partitions(ORDERS, 2000, TV2))


def test_a_transaction_version_2_commit_bumps_the_epoch_and_keeps_the_last() -> None:
    metadata = ongoing()

    step(metadata, metadata.prepare_abort_or_commit(S.PREPARE_COMMIT, TV2, -1, 3000, False))

    assert (metadata.state, metadata.producer_epoch, metadata.last_producer_epoch) == (
        S.PREPARE_COMMIT,
        1,
        0,
    )
    step(metadata, metadata.prepare_complete(3001))
    assert (metadata.state, metadata.producer_epoch, metadata.partitions) == (
        S.COMPLETE_COMMIT,
        1,
        frozenset(),
    )
    assert metadata.start_timestamp_ms == 2000


def test_a_transaction_version_1_commit_keeps_the_epoch() -> None:
    metadata = initialised()
    step(metadata, metadata.prepare_add_partitions(ORDERS, 2000, 0))

    step(metadata, metadata.prepare_abort_or_commit(S.PREPARE_COMMIT, 0, -1, 3000, False))

    assert metadata.producer_epoch == 0


def test_init_producer_id_retry_and_fencing_follow_the_expected_epoch() -> None:
    metadata = initialised()
    metadata.last_producer_epoch = -1
    # The producer re-initialises after an error at its current epoch: bumped, last kept.
    step(metadata, metadata.prepare_increment_producer_epoch(60000, 0, 5000))
    assert (metadata.producer_epoch, metadata.last_producer_epoch) == (1, 0)
    # Its retry of that call (the answer was lost) gets the same epoch again.
    step(metadata, metadata.prepare_increment_producer_epoch(60000, 0, 5001))
    assert (metadata.producer_epoch, metadata.last_producer_epoch) == (1, 0)
    # An older instance is fenced.
    with pytest.raises(ProducerFencedError, match="epoch 7 is neither"):
        metadata.prepare_increment_producer_epoch(60000, 7, 5002)
    assert metadata.pending_state is None


def test_a_new_instance_fences_the_open_transaction_then_aborts_it() -> None:
    metadata = ongoing()

    fence = metadata.prepare_fence_producer_epoch()

    assert (fence.state, fence.producer_epoch) == (S.PREPARE_EPOCH_FENCE, 1)
    # The coordinator moves the fence straight on to the abort (Kafka never completes it).
    with pytest.raises(ValueError, match="does not follow"):
        metadata.complete_transition(fence)
    metadata.abandon_transition()
    metadata.has_failed_epoch_fence = True
    assert metadata.prepare_fence_producer_epoch().producer_epoch == 0


def test_one_transition_at_a_time() -> None:
    metadata = ongoing()
    metadata.prepare_abort_or_commit(S.PREPARE_COMMIT, TV2, -1, 3000, False)

    with pytest.raises(ValueError, match="while PrepareCommit is pending"):
        metadata.prepare_add_partitions(ORDERS, 3001, TV2)


@pytest.mark.parametrize(
    "prepare",
    [
        lambda m: m.prepare_abort_or_commit(S.PREPARE_COMMIT, TV2, -1, 3000, False),
        lambda m: m.prepare_complete(3000),
    ],
)
def test_an_empty_transactional_id_cannot_commit_or_complete(prepare) -> None:  # noqa: ANN001
    metadata = initialised()
    with pytest.raises(ValueError, match="may not follow Empty"):
        prepare(metadata)


def test_transaction_version_2_may_abort_what_never_started_and_starts_it_now() -> None:
    metadata = initialised()

    transit = metadata.prepare_abort_or_commit(S.PREPARE_ABORT, TV2, -1, 4000, True)
    step(metadata, transit)

    assert (metadata.state, metadata.start_timestamp_ms, metadata.producer_epoch) == (
        S.PREPARE_ABORT,
        4000,
        1,
    )


def test_an_epoch_running_out_rotates_the_producer_id_as_the_transaction_completes() -> None:
    metadata = ongoing(epoch=INT16_MAX - 2)
    assert is_epoch_exhausted(INT16_MAX - 1) and not is_epoch_exhausted(INT16_MAX - 2)

    step(metadata, metadata.prepare_abort_or_commit(S.PREPARE_COMMIT, TV2, 11, 3000, False))
    assert (metadata.producer_epoch, metadata.next_producer_id) == (INT16_MAX - 1, 11)
    step(metadata, metadata.prepare_complete(3001))

    assert (metadata.producer_id, metadata.producer_epoch, metadata.previous_producer_id) == (
        11,
        0,
        10,
    )
    assert metadata.next_producer_id == -1


def test_the_epoch_of_an_exhausted_producer_is_not_incremented() -> None:
    metadata = initialised(epoch=INT16_MAX - 1)
    with pytest.raises(ValueError, match="no producer epoch left"):
        metadata.prepare_increment_producer_epoch(60000, None, 2000)
    transit = metadata.prepare_producer_id_rotation(12, 60000, 2000, record_last_epoch=True)
    step(metadata, transit)
    assert (metadata.producer_id, metadata.producer_epoch, metadata.last_producer_epoch) == (
        12,
        0,
        INT16_MAX - 1,
    )


def test_a_rotation_during_a_transaction_is_refused() -> None:
    with pytest.raises(ValueError, match="still pending"):
        ongoing().prepare_producer_id_rotation(12, 60000, 2000, record_last_epoch=False)


def test_a_completion_that_does_not_match_its_prepare_is_refused() -> None:
    metadata = ongoing()
    transit = metadata.prepare_abort_or_commit(S.PREPARE_COMMIT, TV2, -1, 3000, False)
    other = TxnTransitMetadata(**{**transit.__dict__, "partitions": frozenset()})

    with pytest.raises(ValueError, match="does not follow"):
        metadata.complete_transition(other)
    with pytest.raises(ValueError, match="never prepared"):
        initialised().complete_transition(transit)


def test_dead_is_prepared_for_expiry_and_never_completed() -> None:
    metadata = initialised()
    dead = metadata.prepare_dead()
    assert dead.state is S.DEAD
    with pytest.raises(ValueError, match="does not follow"):
        metadata.complete_transition(dead)
    with pytest.raises(ValueError, match="may not follow Ongoing"):
        ongoing().prepare_dead()


def test_a_metadata_rebuilt_from_its_record_has_its_state() -> None:
    metadata = ongoing()
    value = metadata.prepare_no_transit().to_log_value()

    rebuilt = TransactionMetadata.from_log_value("app", value)

    assert (rebuilt.state, rebuilt.partitions, rebuilt.producer_epoch) == (S.ONGOING, ORDERS, 0)
