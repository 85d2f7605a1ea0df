"""AsyncClient against a real router and job manager."""

from __future__ import annotations

import asyncio
from typing import Any, Awaitable, Callable

import pytest

from emq_client import AsyncClient, JobCancelled, JobFailed, QueueFull, ResultTimeout, WrongThread, call

from conftest import Router


def run(coro_fn: Callable[[], Awaitable[Any]], timeout: float = 120) -> Any:
    """Run a test coroutine with an overall bound."""
    return asyncio.run(asyncio.wait_for(coro_fn(), timeout))


def test_async_results_and_errors(cluster: Router) -> None:
    async def main() -> None:
        async with AsyncClient(cluster.frontend, admin_addr=cluster.admin) as c:
            job = await c.submit("emq_test_jobs.add", 2, 3)
            assert await job.result(30) == 5
            assert (await job.status()).state == "done"
            jobs = [await c.submit(call("echo", i)) for i in range(20)]
            assert await asyncio.gather(*(j.result(30) for j in jobs)) == list(range(20))
            with pytest.raises(JobFailed) as e:
                await (await c.submit("emq_test_jobs.fail", "async boom")).result(30)
            assert e.value.kind == "exception" and "async boom" in e.value.message
            slow = await c.submit("emq_test_jobs.sleep", 30)
            with pytest.raises(ResultTimeout):
                await slow.result(0.1)
            assert await slow.cancel() in ("cancelling", "cancelled")
            with pytest.raises(JobCancelled):
                await slow.result(20)

    run(main)


def test_async_submit_many(cluster: Router) -> None:
    async def main() -> None:
        async with AsyncClient(cluster.frontend, admin_addr=cluster.admin, window=200) as c:
            jobs = await c.submit_many([call("echo", i) for i in range(2000)])
            values = [await j.result(60) for j in jobs]
            assert values == list(range(2000))

    run(main)


def test_async_cancel_queued_and_reject(bare_router: Router) -> None:
    async def main() -> None:
        async with AsyncClient(bare_router.frontend, admin_addr=bare_router.admin, queue_full_timeout=0) as c:
            jobs = [await c.submit(call("noop")) for _ in range(3)]
            with pytest.raises(QueueFull):
                await c.submit(call("noop"))
            assert (await jobs[0].status()).state == "queued"
            assert await jobs[0].cancel() == "cancelled"
            with pytest.raises(JobCancelled):
                await jobs[0].result(10)

    run(main)


def test_async_client_is_bound_to_its_loop(cluster: Router) -> None:
    c = AsyncClient(cluster.frontend, admin_addr=cluster.admin)

    async def first() -> None:
        assert await (await c.submit(call("echo", 1))).result(30) == 1

    async def second() -> None:
        with pytest.raises(WrongThread):
            await c.submit(call("noop"))

    run(first)
    run(second)
