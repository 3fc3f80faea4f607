"""RequestMemoryPool: reservations against a capacity, and readers woken when memory returns."""

from __future__ import annotations

from odradek.network.request_memory_pool import RequestMemoryPool


def test_reservations_stop_at_the_capacity_unless_forced() -> None:
    pool = RequestMemoryPool(100)
    assert pool.try_reserve(60) and not pool.exhausted
    assert not pool.try_reserve(41) and pool.reserved == 60  # nothing taken when refused
    assert pool.try_reserve(40) and pool.exhausted
    pool.reserve(8)  # the bytes a reader needs to make progress at all
    assert pool.reserved == 108 and pool.exhausted
    pool.release(108)
    assert pool.reserved == 0 and not pool.exhausted


def test_unbounded_pool_is_never_exhausted() -> None:
    pool = RequestMemoryPool(None)
    assert pool.try_reserve(1 << 40) and not pool.exhausted


def test_waiters_are_woken_once_in_order_when_memory_returns_below_the_capacity() -> None:
    pool = RequestMemoryPool(100)
    pool.reserve(150)
    woken: list[str] = []
    pool.wait(lambda: woken.append("first"))
    second = lambda: woken.append("second")  # noqa: E731
    pool.wait(second)
    cancelled = lambda: woken.append("cancelled")  # noqa: E731
    pool.wait(cancelled)
    pool.cancel_wait(cancelled)
    pool.release(50)  # still at the capacity: nobody can read yet
    assert woken == []
    pool.release(1)
    assert woken == ["first", "second"]
    pool.release(10)
    assert woken == ["first", "second"]  # once each


def test_a_waiter_may_wait_again_while_being_woken() -> None:
    pool = RequestMemoryPool(10)
    pool.reserve(10)
    calls = []

    def waiter() -> None:
        calls.append(pool.reserved)
        if not pool.try_reserve(5):
            pool.wait(waiter)

    pool.wait(waiter)
    pool.release(2)  # 8 reserved: 5 more do not fit, it waits again
    pool.release(4)  # 4 reserved: they fit
    assert calls == [8, 4] and pool.reserved == 9
