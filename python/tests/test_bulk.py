"""10,000 jobs through submit_many, and their results."""

from __future__ import annotations

import time
from pathlib import Path

from emq_client import call

from conftest import Router, start_router

N = 10_000


def test_ten_thousand_jobs_submit_many(cluster: Router) -> None:
    with cluster.client() as c:
        started = time.monotonic()
        jobs = c.submit_many([call("echo", i) for i in range(N)])
        assert len(jobs) == N and all(j.accepted for j in jobs)
        values = [j.result(120) for j in jobs]
        elapsed = time.monotonic() - started
        assert values == list(range(N))
        print(f"\n{N} jobs submitted and answered in {elapsed:.2f} s ({N / elapsed:.0f} jobs/s, debug binaries)")
        del jobs
        assert c.outstanding == 0


def test_many_python_jobs(cluster: Router, kind: str) -> None:
    with cluster.connect(kind) as c:
        jobs = c.submit_many([("emq_test_jobs.add", (i, i)) for i in range(200)], window=20, max_unfinished=50)
        assert [j.result(120) for j in jobs] == [2 * i for i in range(200)]


def test_submit_many_sends_queue_full_refusals_again_past_a_small_hwm(tmp_path: Path, kind: str) -> None:
    """2,000 jobs against --hwm 50 with one job manager draining the queue:
    the refusals are backpressure, sent again until accepted; every job
    runs once (the async client once failed here with
    ``BulkRejected: 1135 of 2000 jobs rejected``)."""
    router = start_router(tmp_path, "--hwm", "50")
    try:
        router.add_jobmanager(concurrency=4)
        with router.connect(kind) as c:
            jobs = c.submit_many([call("echo", i) for i in range(2000)])
            assert all(j.accepted for j in jobs)
            assert [j.result(60) for j in jobs] == list(range(2000))
    finally:
        router.stop()
