"""start_eagerly: a request's coroutine runs at once, and becomes a task only where it waits."""

from __future__ import annotations

import asyncio

import pytest
import uvloop

from odradek.network.eager_start import start_eagerly


@pytest.fixture(params=["asyncio", "uvloop"])
def run(request: pytest.FixtureRequest):
    return asyncio.run if request.param == "asyncio" else uvloop.run


def test_a_coroutine_that_never_waits_is_done_before_start_returns(run) -> None:
    steps: list[str] = []

    async def answer() -> None:
        steps.append("answered")

    async def main() -> None:
        assert start_eagerly(asyncio.get_running_loop(), answer()) is None
        assert steps == ["answered"]

    run(main())


def test_one_that_waits_goes_on_as_a_task_that_is_current_after_the_wait(run) -> None:
    steps: list[object] = []

    async def handle(ready: asyncio.Event) -> None:
        steps.append("started")  # in the caller, before start_eagerly returns
        try:
            await ready.wait()
            steps.append(asyncio.current_task())
            await asyncio.sleep(0)
            steps.append("answered")
        finally:
            steps.append("finally")

    async def main() -> None:
        ready = asyncio.Event()
        task = start_eagerly(asyncio.get_running_loop(), handle(ready), name="request-1")
        assert task is not None and task.get_name() == "request-1"
        assert steps == ["started"]
        ready.set()
        await task
        assert steps == ["started", task, "answered", "finally"]

    run(main())


@pytest.mark.parametrize("before_first_step", [True, False])
def test_cancelling_the_task_ends_the_coroutine_through_its_finally(
    run, before_first_step: bool
) -> None:
    steps: list[str] = []

    async def handle() -> None:
        try:
            await asyncio.Event().wait()
            steps.append("answered")
        finally:
            steps.append("finally")

    async def main() -> None:
        task = start_eagerly(asyncio.get_running_loop(), handle())
        if not before_first_step:
            await asyncio.sleep(0)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        assert steps == ["finally"]

    run(main())


def test_an_exception_before_the_first_wait_goes_to_the_loops_handler(run) -> None:
    reported: list[dict] = []

    async def broken() -> None:
        raise ValueError("a defect")

    async def main() -> None:
        loop = asyncio.get_running_loop()
        loop.set_exception_handler(lambda _, context: reported.append(context))
        assert start_eagerly(loop, broken()) is None
        assert isinstance(reported[0]["exception"], ValueError)

    run(main())


def test_an_exception_after_a_wait_is_the_tasks(run) -> None:
    async def broken() -> None:
        await asyncio.sleep(0)
        raise ValueError("a defect")

    async def main() -> None:
        task = start_eagerly(asyncio.get_running_loop(), broken())
        with pytest.raises(ValueError, match="a defect"):
            await task

    run(main())
