"""ClientCache: the clients a Python worker keeps between Spark tasks, with real producers
against a broker (no Spark needed)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from serve_process import ServeProcess

from odradek.client import Admin, NewTopic, Producer
from odradek.spark.client_cache import ClientCache, settings_key


@pytest.fixture(scope="module")
def bootstrap(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with ServeProcess(tmp_path_factory.mktemp("broker") / "data") as broker:
        with Admin(bootstrap_servers=broker.bootstrap) as admin:
            admin.create_topics([NewTopic("cached", 1)])
        yield broker.bootstrap


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def works(producer: Producer) -> bool:
    """Whether ``producer`` still delivers (False once it is closed)."""
    try:
        return producer.send("cached", b"v").result(10).offset >= 0
    except RuntimeError:
        return False


def lend(cache: ClientCache[Producer], configs: dict):
    return cache.lend(settings_key(configs), lambda: Producer(**configs))


def test_a_client_is_lent_again_under_its_key_and_to_one_user_at_a_time(bootstrap: str) -> None:
    cache: ClientCache[Producer] = ClientCache()
    configs = {"bootstrap_servers": bootstrap}
    other = {"bootstrap_servers": bootstrap, "linger_ms": 1}
    try:
        with lend(cache, configs) as first:
            assert works(first)
        with lend(cache, configs) as again:
            assert again is first
            with lend(cache, configs) as meanwhile:
                assert meanwhile is not first
        with lend(cache, other) as different:
            assert different is not first
        # One idle client per key: the one given back second replaced (and closed) the first.
        assert len(cache) == 2
        assert works(first) and not works(meanwhile)
    finally:
        cache.close()
    assert len(cache) == 0 and not works(first) and not works(different)


def test_a_client_whose_user_failed_is_discarded(bootstrap: str) -> None:
    discarded = []
    cache: ClientCache[Producer] = ClientCache(discard=lambda p: (discarded.append(p), p.close(0)))
    configs = {"bootstrap_servers": bootstrap}
    with pytest.raises(ValueError), lend(cache, configs) as failed:
        raise ValueError("the task failed")
    assert discarded == [failed] and not works(failed) and len(cache) == 0
    with lend(cache, configs) as fresh:
        assert fresh is not failed and works(fresh)
    cache.close()


def test_idle_clients_expire_and_the_least_recently_used_goes_beyond_capacity(
    bootstrap: str,
) -> None:
    clock = Clock()
    cache: ClientCache[Producer] = ClientCache(idle_timeout_s=60, capacity=2, clock=clock)
    kept = [{"bootstrap_servers": bootstrap, "client_id": f"p{i}"} for i in range(3)]
    try:
        lent = []
        for configs in kept:
            with lend(cache, configs) as producer:
                lent.append(producer)
            clock.now += 1
        assert len(cache) == 2 and not works(lent[0]) and works(lent[1]) and works(lent[2])
        clock.now += 58  # p1 was given back 60 s ago, p2 59 s ago
        with lend(cache, kept[0]) as renewed:
            assert renewed not in lent
        assert not works(lent[1]) and works(lent[2])
    finally:
        cache.close()
