"""10,000 jobs through submit_many, and their results."""

from __future__ import annotations

import time

from emq_client import Client, call

from conftest import Router

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


def test_many_python_jobs(cluster: Router) -> None:
    with cluster.client() as c:
        jobs = c.submit_many([("emq_test_jobs.add", (i, i)) for i in range(200)], window=20, max_unfinished=50)
        assert [j.result(120) for j in jobs] == [2 * i for i in range(200)]
