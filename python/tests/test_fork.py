"""A client made before ``os.fork()`` and used in the child (issue 26 item
3): the child reconnects with fresh sockets and gets its result within
seconds — it once spun at 100 % CPU in ``submit()``, past ``ack_timeout`` —
and the parent's client keeps working."""

from __future__ import annotations

import asyncio
import os
import signal
import sys
import time
import traceback
from typing import Callable

import pytest

from emq_client import AsyncClient, call

from conftest import Router

#: The child must be done within this many seconds.
CHILD_BOUND = 15.0


def in_child(work: Callable[[], object], expected: object) -> None:
    """Fork; the child runs ``work`` and exits 0 if it returned
    ``expected``. The parent waits for it at most :data:`CHILD_BOUND`
    seconds (then kills it and fails)."""
    pid = os.fork()
    if pid == 0:
        code = 3
        try:
            got = work()
            code = 0 if got == expected else 2
            if code:
                print(f"child got {got!r}", file=sys.stderr)
        except BaseException:  # noqa: BLE001 - the child reports and exits
            traceback.print_exc()
            code = 1
        finally:
            sys.stderr.flush()
            os._exit(code)
    deadline = time.monotonic() + CHILD_BOUND
    try:
        while True:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if time.monotonic() > deadline:
                pytest.fail(f"the child did not finish within {CHILD_BOUND} s (hung or spinning)")
            time.sleep(0.02)
    finally:
        if not done:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
    assert os.WIFEXITED(status) and os.WEXITSTATUS(status) == 0, f"child status {status}"


def test_a_client_used_in_a_forked_child_reconnects_there(cluster: Router) -> None:
    with cluster.client(ack_timeout=5) as c:
        assert c.submit(call("echo", "parent")).result(30) == "parent"
        in_child(lambda: c.submit(call("echo", "child")).result(10), "child")
        assert c.submit(call("echo", "parent again")).result(30) == "parent again"
        assert c.job(c.submit(call("noop")).msgid).status().queue == "default"


def test_an_async_client_used_in_a_forked_child_reconnects_there(cluster: Router) -> None:
    c = AsyncClient(cluster.frontend, admin_addr=cluster.admin, ack_timeout=5)

    async def echo(value: str) -> object:
        return await (await c.submit(call("echo", value))).result(10)

    loop = asyncio.new_event_loop()
    try:
        assert loop.run_until_complete(echo("parent")) == "parent"
        # The child runs its own loop (the parent's is the parent's).
        in_child(lambda: asyncio.run(echo("child")), "child")
        assert loop.run_until_complete(echo("parent again")) == "parent again"
    finally:
        loop.run_until_complete(c.close())
        loop.close()
