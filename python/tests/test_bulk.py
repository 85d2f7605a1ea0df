"""10,000 jobs through submit_many, and their results; the bulk window
against a router that answers in bursts, out of order, refusing some."""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Dict, List

import pytest
import zmq

from emq_client import Rejected, call, wire

from conftest import Router, make_client, start_router

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


class BurstRouter:
    """A ROUTER on a free loopback port that holds the REQUESTs it gets
    until none has come for ``quiet`` seconds (the client's window is
    full, or it is done), then answers them all, newest first: jobs whose
    number (``call("echo", i)``) is a multiple of 7 are refused for good
    (``malformed``), multiples of 5 are answered ``queue-full`` the first
    time, every other one gets REPLY and a RESULT with its number. It
    records the most REQUESTs it ever held unanswered and every REQUEST's
    frames. Stopped by ``close()``; every wait is bounded."""

    def __init__(self, quiet: float = 0.02) -> None:
        self.quiet = quiet
        self.sock = zmq.Context.instance().socket(zmq.ROUTER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.bind("tcp://127.0.0.1:*")
        self.addr = self.sock.getsockopt_string(zmq.LAST_ENDPOINT)
        self.requests: List[List[bytes]] = []
        self.most_held = 0
        self.full_once: Dict[bytes, int] = {}
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self.run, daemon=True)
        self.thread.start()

    def answer(self, frames: List[bytes]) -> List[List[bytes]]:
        ident, msgid = frames[0], frames[4]
        i = json.loads(frames[7])[1]["args"]
        head = [ident, b"", wire.PROTOCOL]
        if i % 7 == 0:
            return [head + [b"REJECT", b"m", msgid, b"malformed", b"no"]]
        if i % 5 == 0 and msgid not in self.full_once:
            self.full_once[msgid] = i
            return [head + [b"REJECT", b"m", msgid, b"queue-full", b"full"]]
        return [head + [b"REPLY", b"m", msgid], head + [b"RESULT", b"m", msgid, b"ok", json.dumps({"value": i}).encode()]]

    def run(self) -> None:
        held: List[List[bytes]] = []
        while not self.stop.is_set():
            if self.sock.poll(int(self.quiet * 1000)):
                frames = self.sock.recv_multipart()
                if frames[3] == b"REQUEST":
                    self.requests.append(frames)
                    held.append(frames)
                    self.most_held = max(self.most_held, len(held))
                continue
            for frames in reversed(held):
                for out in self.answer(frames):
                    self.sock.send_multipart(out)
            held = []

    def close(self) -> None:
        self.stop.set()
        self.thread.join(5)
        self.sock.close(0)


def test_the_bulk_window_against_a_router_that_answers_in_bursts_and_refuses_some(kind: str) -> None:
    """300 jobs, window 16: never more than 16 unanswered (the queue-full
    resends too: they once went up to the client's default window), and
    the window is used; every job is answered: the refused ones
    (every 7th) raise their Rejected, the queue-full ones (every 5th, not
    7th) went again with the same frames and ran, the rest ran once."""
    router = BurstRouter()
    try:
        with make_client(kind, router.addr, ack_timeout=10, queue_full_timeout=10) as c:
            jobs = c.submit_many([call("echo", i) for i in range(300)], window=16, raise_on_reject=False)
            assert len(jobs) == 300
            for i, job in enumerate(jobs):
                if i % 7 == 0:
                    assert not job.accepted
                    with pytest.raises(Rejected) as e:
                        job.result(5)
                    assert e.value.reason == "malformed"
                else:
                    assert job.accepted and job.result(5) == i
        # The window bounds what is unanswered (the resends too), and is
        # used: a client in lockstep would have 1 held at a time.
        assert 2 <= router.most_held <= 16
        sent: Dict[bytes, List[List[bytes]]] = {}
        for frames in router.requests:
            sent.setdefault(frames[4], []).append(frames[1:])
        again = {m: f for m, f in sent.items() if len(f) > 1}
        assert sorted(router.full_once[m] for m in again) == [i for i in range(300) if i % 5 == 0 and i % 7]
        assert all(len(f) == 2 and f[0] == f[1] for f in again.values())
        assert len(sent) == 300
    finally:
        router.close()
