"""Batches with callbacks (``client.batch``, Sidekiq Pro's model) through
Client and AsyncClient against a real emq-router and emq-jobmanager
(docs/PROTOCOL.md, "Batches"): live counts, each callback once with the
batch's status, on_success only when nothing failed, adding after close
refused."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any, Dict, Iterator, List

import pytest

import emq_pyclient_jobs
import emq_test_jobs
from emq_client import AdminError, AsyncClient, BatchClosed, Client, JobNotFound, Rejected, task

from conftest import Router, wait_until


@pytest.fixture
def client(cluster: Router) -> Iterator[Client]:
    with Client(cluster.frontend, admin_addr=cluster.admin) as c:
        yield c


def lines(path: Path) -> List[Dict[str, Any]]:
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_batch_counts_and_runs_each_callback_once(client: Client, tmp_path: Path) -> None:
    out = tmp_path / "callbacks.jsonl"
    on_success = task(emq_pyclient_jobs.batch_callback, str(out))
    on_complete = task(emq_pyclient_jobs.batch_callback, str(out))
    with client.batch(on_success=on_success, on_complete=on_complete, description="five adds") as b:
        jobs = [b.add(emq_test_jobs.add, i, i) for i in range(5)]
        st = b.status()
        assert st.state == "open" and st.total == 5, st
        # A second client adds to the same batch by its id.
        with Client(client.addr, admin_addr=client.admin_addr) as other:
            assert other.batch_of(b.id).add(emq_test_jobs.add, 10, 10).result(60) == 20
    assert [j.result(60) for j in jobs] == [0, 2, 4, 6, 8]
    assert b.wait(60).succeeded == 6
    # The callbacks are jobs the router submits: wait for their results.
    assert client.job(f"{b.id}/on-success").result(60)["event"] == "success"
    assert client.job(f"{b.id}/on-complete").result(60)["event"] == "complete"
    got = sorted(lines(out), key=lambda s: str(s["event"]))
    assert got == [
        {"batch": b.id, "event": "complete", "total": 6, "succeeded": 6, "failed": 0, "failed_ids": []},
        {"batch": b.id, "event": "success", "total": 6, "succeeded": 6, "failed": 0, "failed_ids": []},
    ]
    st = b.status()
    assert (st.state, st.total, st.pending, st.succeeded, st.failed) == ("finished", 6, 0, 6, 0)
    with pytest.raises(BatchClosed):
        b.add(emq_test_jobs.add, 1, 1)
    # The job view links to its batch.
    assert client.admin("job", msgid=jobs[0].msgid)["job"]["batch"] == b.id


def test_a_failed_job_runs_on_complete_not_on_success(client: Client, tmp_path: Path) -> None:
    out = tmp_path / "callbacks.jsonl"
    b = client.batch(
        on_success=task(emq_pyclient_jobs.batch_callback, str(out)),
        on_complete=task(emq_pyclient_jobs.batch_callback, str(out)),
    )
    ok, bad = b.add_many([(emq_test_jobs.add, (1, 2)), (emq_test_jobs.fail, ("nope",))], retries=1)
    b.close()
    assert ok.result(60) == 3
    assert b.wait(60).failed == 1
    status = client.job(f"{b.id}/on-complete").result(60)
    assert status["failed_ids"] == [bad.msgid], status
    assert (status["succeeded"], status["failed"], status["total"]) == (1, 1, 2)
    assert [s["event"] for s in lines(out)] == ["complete"]
    view = client.admin("batch", id=b.id)["batch"]
    assert view["callbacks"]["on_success"]["state"] == "skipped"
    with pytest.raises(BatchClosed):
        client.submit(emq_test_jobs.add, 1, 1, headers=[f"batch:{b.id}"])
    b.close()  # closing again is fine
    unknown = client.batch_of("no-such-batch")
    with pytest.raises(Rejected) as e:
        unknown.close()
    assert e.value.reason == "not-found"
    with pytest.raises(JobNotFound):
        unknown.status()


def test_async_batch_with_async_with(cluster: Router, tmp_path: Path) -> None:
    out = tmp_path / "callbacks.jsonl"

    async def main() -> Dict[str, Any]:
        async with AsyncClient(cluster.frontend, admin_addr=cluster.admin) as c:
            async with c.batch(on_complete=task(emq_pyclient_jobs.batch_callback, str(out))) as b:
                jobs = [await b.add(emq_test_jobs.add, i, 1) for i in range(3)]
                assert (await b.status()).total == 3
            assert [await j.result(60) for j in jobs] == [1, 2, 3]
            await b.wait(60)
            status: Dict[str, Any] = await c.job(f"{b.id}/on-complete").result(60)
            st = await b.status()
            assert (st.state, st.succeeded, st.failed) == ("finished", 3, 0)
            b2 = await c.batch()
            await b2.close()
            with pytest.raises(BatchClosed):
                await b2.add(emq_test_jobs.add, 1, 1)
            return status

    status = asyncio.run(asyncio.wait_for(main(), 120))
    assert status["total"] == 3 and status["event"] == "complete"
    wait_until("the callback's line", lambda: len(lines(out)) == 1, 10)


def test_cancel_stops_the_batchs_jobs_and_runs_on_complete(client: Client, tmp_path: Path) -> None:
    out = tmp_path / "callbacks.jsonl"
    b = client.batch(
        on_success=task(emq_pyclient_jobs.batch_callback, str(out)),
        on_complete=task(emq_pyclient_jobs.batch_callback, str(out)),
    )
    # More sleepers than the job manager's 4 slots: some run, some wait.
    jobs = b.add_many([(emq_test_jobs.sleep, (60,)) for _ in range(6)])
    wait_until("a sleeper running", lambda: client.admin("job", msgid=jobs[0].msgid)["job"]["state"] == "in-flight", 60)
    assert b.cancel() in ("cancelling", "cancelled")
    st = b.wait(60)
    assert (st.state, st.total, st.succeeded, st.failed, st.cancelled) == ("finished", 6, 0, 6, True), st
    status = client.job(f"{b.id}/on-complete").result(60)
    assert (status["event"], status["failed"]) == ("complete", 6), status
    assert sorted(status["failed_ids"]) == sorted(j.msgid for j in jobs)
    assert [s["event"] for s in lines(out)] == ["complete"]
    assert client.admin("batch", id=b.id)["batch"]["callbacks"]["on_success"]["state"] == "skipped"
    with pytest.raises(BatchClosed):
        b.add(emq_test_jobs.add, 1, 1)
    with pytest.raises(AdminError) as e:
        b.cancel()
    assert e.value.kind == "conflict"
