"""Failover lists (``Client("tcp://a,tcp://b")``) and results until delivered,
against real routers: a dead address in the list is skipped; jobs
acknowledged by a router that is then killed with SIGKILL get their results
from the router that takes over its journal on other addresses — also
results the first router had produced and the client had not read; submits
sent into a frozen router's connection go to the router that serves."""

from __future__ import annotations

import asyncio
import signal
import sys
from pathlib import Path
from typing import Iterator, List

import pytest

from emq_client import AsyncClient, Client, EmqConnectionError, call, link
from emq_client.link import parse_endpoints

from conftest import PYTHONPATH, Proc, Router, binary, free_port, make_client, spawn, start_router, wait_until

FAST = ["--heartbeat-interval", "0.5", "--heartbeat-liveness", "3"]


def test_failover_lists_are_parsed_as_the_binaries_do() -> None:
    assert parse_endpoints(" tcp://127.0.0.1:1 ,,tcp://127.0.0.1:2, tcp://127.0.0.1:1") == [
        "tcp://127.0.0.1:1",
        "tcp://127.0.0.1:2",
    ]
    assert parse_endpoints("ipc:///tmp/x") == ["ipc:///tmp/x"]
    for bad in ["", " , ", "127.0.0.1:1", "tcp://127.0.0.1:x", "tcp://:1"]:
        with pytest.raises(ValueError):
            parse_endpoints(bad)
    with pytest.raises(EmqConnectionError, match="bad endpoint"):
        Client("tcp://127.0.0.1:1,nope")


def test_a_dead_address_in_the_list_is_skipped(cluster: Router, kind: str) -> None:
    dead = f"tcp://127.0.0.1:{free_port()}"
    with make_client(kind, f"{dead},{cluster.frontend}", admin_addr=f"{dead},{cluster.admin}") as c:
        jobs = [c.submit(call("echo", i)) for i in range(10)]
        assert [j.result(30) for j in jobs] == list(range(10))
        assert jobs[0].status().state == "done"


def test_the_async_client_takes_a_list_too(cluster: Router) -> None:
    dead = f"tcp://127.0.0.1:{free_port()}"

    async def run() -> List[int]:
        async with AsyncClient(f"{dead},{cluster.frontend}", admin_addr=f"{dead},{cluster.admin}") as c:
            jobs = await c.submit_many([call("echo", i) for i in range(20)])
            return [await j.result(30) for j in jobs]

    assert asyncio.run(run()) == list(range(20))


class Pair:
    """Two router addresses sharing one journal: A runs first, B takes over."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp
        self.journal = tmp / "router.journal"
        self.ports = [[free_port() for _ in range(3)] for _ in range(2)]
        self.routers: List[Router] = []
        self.jms: List[Proc] = []

    def addr(self, which: int, kind: int) -> str:
        return f"tcp://127.0.0.1:{self.ports[which][kind]}"

    def lists(self) -> List[str]:
        """frontends, backends, admins as failover lists."""
        return [f"{self.addr(0, k)},{self.addr(1, k)}" for k in range(3)]

    def start(self, which: int) -> Router:
        r = start_router(self.tmp, *FAST, journal=self.journal, ports=self.ports[which])
        self.routers.append(r)
        return r

    def jobmanager(self) -> Proc:
        jm = spawn(
            f"emq-jobmanager-{len(self.jms)}",
            [str(binary("emq-jobmanager")), "--broker", self.lists()[1], "--python", sys.executable,
             "-J", "4", "--ack-timeout", "1", *FAST],
            self.tmp,
            {"PYTHONPATH": PYTHONPATH},
        )
        self.jms.append(jm)
        return jm

    def stop(self) -> None:
        for jm in self.jms:
            jm.stop()
        for r in self.routers:
            r.proc.stop()


@pytest.fixture
def pair(tmp_path: Path) -> Iterator[Pair]:
    p = Pair(tmp_path)
    try:
        yield p
    finally:
        p.stop()


def held(router: Router) -> int:
    with router.client(admin_timeout=2.0) as c:
        return int(c.admin("status")["results"]["held"])


def test_results_reach_the_client_across_a_failover_to_another_address(pair: Pair) -> None:
    frontends, _, admins = pair.lists()
    a = pair.start(0)
    pair.jobmanager()
    with Client(frontends, admin_addr=admins, ack_timeout=20) as c:
        # Results the router produced while the client read nothing: held
        # (result-receipt) until the client confirms them.
        done = c.submit_many([call("echo", f"before-{i}") for i in range(20)])
        wait_until("20 results held on router A", lambda: held(a) == 20, 30)
        # Jobs acknowledged and still waiting: no job manager serves "later".
        waiting = c.submit_many([call("echo", f"queued-{i}") for i in range(10)], queue="later")
        a.proc.popen.kill()
        a.proc.popen.wait(10)
        b = pair.start(1)
        # A job manager for "later" on the new router (through its list).
        jm = spawn(
            "emq-jobmanager-later",
            [str(binary("emq-jobmanager")), "--broker", pair.lists()[1], "-Q", "later", "-J", "2",
             "--ack-timeout", "1", *FAST],
            pair.tmp,
        )
        pair.jms.append(jm)
        assert [j.result(60) for j in done] == [f"before-{i}" for i in range(20)]
        assert [j.result(60) for j in waiting] == [f"queued-{i}" for i in range(10)]
        # A new job goes to the router that serves now.
        assert c.submit(call("echo", "after")).result(30) == "after"
        wait_until("every result receipted on router B", lambda: held(b) == 0, 30)


def test_the_async_client_gets_results_across_a_failover(pair: Pair) -> None:
    frontends, _, admins = pair.lists()
    a = pair.start(0)

    async def submit(c: AsyncClient) -> List[str]:
        jobs = await c.submit_many([call("echo", f"j{i}") for i in range(15)])
        # Acknowledged by A, which dies before any worker ran them.
        a.proc.popen.kill()
        a.proc.popen.wait(10)
        pair.start(1)
        pair.jobmanager()
        return [await j.result(60) for j in jobs]

    async def run() -> List[str]:
        async with AsyncClient(frontends, admin_addr=admins, ack_timeout=20) as c:
            return await submit(c)

    assert asyncio.run(run()) == [f"j{i}" for i in range(15)]


def queued_on(router: Router) -> int:
    """Jobs the router holds (any state)."""
    with router.client(admin_timeout=2.0) as c:
        return len(c.admin("jobs", limit=100)["jobs"])


@pytest.mark.parametrize("bulk", [False, True], ids=["submit", "submit_many"])
def test_submits_sent_into_a_frozen_router_go_to_the_one_that_serves(
    tmp_path: Path, kind: str, bulk: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 26 item 2: a client on the failover list A,B, connected to
    both, A then SIGSTOPped. Submits go round-robin into A's frozen
    connection too; once the heartbeat drops it, the client sends every
    unacknowledged one again, same msgid, to B — before, those waited for
    an answer that never came (EmqConnectionError). Every job is
    acknowledged and runs once (B's job manager; A never thaws)."""
    monkeypatch.setattr(link, "LINK_HEARTBEAT_MS", 500)
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    a = start_router(tmp_path / "a")
    b = start_router(tmp_path / "b")
    out = tmp_path / "runs.txt"
    try:
        b.add_jobmanager()
        frontends, admins = f"{a.frontend},{b.frontend}", f"{a.admin},{b.admin}"
        with make_client(kind, frontends, admin_addr=admins, ack_timeout=10) as c:

            def connected_to_both() -> bool:
                c.submit(call("noop"))
                return queued_on(a) > 0 and queued_on(b) > 0

            wait_until("the client to reach both routers", connected_to_both, 20)
            a.proc.popen.send_signal(signal.SIGSTOP)
            specs = [("emq_test_jobs.record", (str(out), f"j{i}")) for i in range(100)]
            if bulk:
                jobs = c.submit_many(specs, window=20)
            else:
                jobs = [c.submit(spec, *args) for spec, args in specs]
            assert all(j.accepted for j in jobs)
            assert [j.result(60) for j in jobs] == [f"j{i}" for i in range(100)]
        runs = sorted(line.split()[0] for line in out.read_text().splitlines())
        assert runs == sorted(f"j{i}" for i in range(100)), "every job ran once"
    finally:
        a.proc.popen.kill()  # also when stopped
        a.proc.popen.wait(10)
        b.stop()
