"""Closing a client whose connection is watched (libzmq's socket monitor)
must leave its zmq context working.

libzmq's I/O thread writes each monitor event with a blocking send. If the
monitor's reader is closed first and an event follows (the router goes away
while the DEALER still lingers over unsent messages), that thread blocks for
good, and with it every socket of the context: a later client (or the rest
of the application) on ``zmq.Context.instance()`` never connects again.
That is what made ``test_wire.py``'s capture router receive nothing in CI.
Each test here puts a client's DEALER into that state on a context of its
own, closes the client, makes the router go, and checks that the context
still carries messages."""

from __future__ import annotations

import asyncio
import gc
from typing import Any, Callable, Iterator, Tuple

import pytest
import zmq
import zmq.asyncio

from emq_client import AsyncClient, Client, link


@pytest.fixture
def silent_router() -> Iterator[Tuple["zmq.Socket[Any]", str]]:
    """A ROUTER (on its own context) that takes one message in, then reads
    nothing: what a client sends after that stays queued in its DEALER."""
    ctx = zmq.Context()
    sock = ctx.socket(zmq.ROUTER)
    sock.setsockopt(zmq.LINGER, 0)
    sock.setsockopt(zmq.RCVHWM, 1)
    sock.bind("tcp://127.0.0.1:*")
    try:
        yield sock, sock.getsockopt_string(zmq.LAST_ENDPOINT)
    finally:
        sock.close(0)
        ctx.destroy(0)


def connect_and_fill(dealer: "zmq.Socket[Any]", router: "zmq.Socket[Any]") -> None:
    """Wait until the router has the DEALER's first message (so the
    connection is up), then queue messages until the DEALER is full."""
    dealer.send(b"hello")
    assert router.poll(5000), "the router got nothing from the client"
    router.recv_multipart()
    for _ in range(5000):
        try:
            dealer.send(b"x" * 32768, zmq.DONTWAIT)
        except zmq.Again:
            return
    pytest.fail("the client's DEALER never filled up")


def context_works(ctx: "zmq.Context[Any]") -> bool:
    """A fresh ROUTER and DEALER on ``ctx`` exchange a message (2 s at
    most)."""
    r = ctx.socket(zmq.ROUTER)
    d = ctx.socket(zmq.DEALER)
    try:
        for s in (r, d):
            s.setsockopt(zmq.LINGER, 0)
        r.bind("tcp://127.0.0.1:*")
        d.connect(r.getsockopt_string(zmq.LAST_ENDPOINT))
        d.send(b"probe")
        return bool(r.poll(2000))
    finally:
        r.close(0)
        d.close(0)


def router_goes_then_context_still_works(router: "zmq.Socket[Any]", ctx: "zmq.Context[Any]") -> None:
    """Close the router under the lingering DEALER (its connection drops:
    a DISCONNECTED event, if the monitor is still on), then probe the
    client's context three times over about a second: once blocked, the
    I/O thread stays blocked."""
    router.close(0)
    for i in range(3):
        assert context_works(ctx), f"the client's zmq context stopped working (probe {i + 1})"
        gc.collect()


@pytest.fixture
def client_ctx() -> Iterator["zmq.Context[Any]"]:
    ctx = zmq.Context()
    yield ctx
    ctx.destroy(0)


def test_client_close_leaves_the_context_working(silent_router: Any, client_ctx: Any) -> None:
    router, addr = silent_router
    c = Client(addr, context=client_ctx, linger=1)
    connect_and_fill(c._sock, router)
    c.close()
    router_goes_then_context_still_works(router, client_ctx)


def test_a_client_dropped_without_close_leaves_the_context_working(silent_router: Any, client_ctx: Any) -> None:
    router, addr = silent_router
    c = Client(addr, context=client_ctx, linger=1)
    connect_and_fill(c._sock, router)
    del c
    gc.collect()
    router_goes_then_context_still_works(router, client_ctx)


def test_async_client_close_leaves_the_context_working(silent_router: Any) -> None:
    router, addr = silent_router
    actx = zmq.asyncio.Context()

    async def main() -> None:
        c = AsyncClient(addr, context=actx, linger=1)
        c._start()
        assert c._sync is not None
        connect_and_fill(c._sync, router)
        await c.close()

    try:
        asyncio.run(asyncio.wait_for(main(), 30))
        router_goes_then_context_still_works(router, zmq.Context.shadow(actx.underlying))
    finally:
        actx.destroy(0)


def test_unwatch_stops_the_monitor_before_closing_its_reader(silent_router: Any, client_ctx: Any) -> None:
    """The rule itself: after ``unwatch`` the watched socket may stay open
    and lose its connection; no event is written any more."""
    router, addr = silent_router
    sock = client_ctx.socket(zmq.DEALER)
    sock.setsockopt(zmq.LINGER, 0)
    pair = link.watch(sock)
    sock.connect(addr)
    connect_and_fill(sock, router)
    assert pair.poll(5000), "no connection event"
    assert link.link_event(pair.recv_multipart()) == (True, addr)
    link.unwatch(sock, pair)
    assert pair.closed and not sock.closed
    try:
        router_goes_then_context_still_works(router, client_ctx)
    finally:
        sock.close(0)
