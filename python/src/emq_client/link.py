"""Failover lists: ``"tcp://a:47291,tcp://b:47291"`` — the same rules as
the emq binaries (``emq_transport::failover``).

- :func:`parse_endpoints`: items stripped, empty ones skipped, each a
  ``tcp://HOST:PORT``, ``ipc://`` or ``inproc://`` address, each once, at
  least one.
- :func:`connect`: a client's DEALER connects to **every** address. A
  standby router binds nothing, so only the router that serves accepts
  the connection. With more than one address the socket gets
  ``ZMQ_IMMEDIATE`` (messages are queued on live connections only; without
  it a DEALER round-robins over every address, and what it queues for one
  where no router listens waits there for good) and ZMTP heartbeats (a
  connection to a machine that died is dropped within seconds).
- :func:`watch` / :func:`link_event`: the socket's connections coming up
  and going down (libzmq's socket monitor), so the client can say hello
  and send again what was not answered after a reconnect.
- :func:`unwatch`: stop the monitor, then close its reader. The order is
  the rule: libzmq's I/O thread writes each event to the monitor with a
  blocking send, so an event (a router going away while the socket still
  lingers) with no reader left blocks that thread, and with it every
  socket of the context — ``zmq.Context.instance()`` by default — for good.

A client keeps its socket, and so its identity, across reconnects and
routers: the router holds results for that identity until they are
received.
"""

from __future__ import annotations

import os
import struct
import uuid
from typing import TYPE_CHECKING, Any, List, Optional, Sequence, Tuple

import zmq

if TYPE_CHECKING:
    from .curve import CurveKeys

#: ZMTP heartbeat interval (ms) on a failover list; the timeout is 3x.
LINK_HEARTBEAT_MS = 1000

_EVENTS = int(zmq.EVENT_HANDSHAKE_SUCCEEDED) | int(zmq.EVENT_DISCONNECTED)


def parse_endpoints(text: str, what: str = "address") -> List[str]:
    """The addresses of a comma-separated list; ``ValueError`` naming
    ``what`` for a bad item or an empty list."""
    out: List[str] = []
    for item in (i.strip() for i in str(text).split(",")):
        if not item:
            continue
        if item.startswith("tcp://"):
            host, sep, port = item[len("tcp://"):].rpartition(":")
            if not sep or not host:
                raise ValueError(f"{what}: bad endpoint {item!r}: expected tcp://HOST:PORT")
            if port != "*" and not (port.isdigit() and int(port) <= 65535):
                raise ValueError(f"{what}: bad endpoint {item!r}: port must be a number from 0 to 65535")
        elif not (item.startswith("ipc://") or item.startswith("inproc://")):
            raise ValueError(f"{what}: bad endpoint {item!r}: expected a tcp://, ipc:// or inproc:// address")
        if item not in out:
            out.append(item)
    if not out:
        raise ValueError(f"{what}: no address given (expected ADDR or ADDR,ADDR,...)")
    return out


def connect(sock: "zmq.Socket[Any]", endpoints: Sequence[str]) -> None:
    """Connect ``sock`` to every endpoint (see the module documentation)."""
    if len(endpoints) > 1:
        sock.setsockopt(zmq.IMMEDIATE, 1)
        sock.setsockopt(zmq.HEARTBEAT_IVL, LINK_HEARTBEAT_MS)
        sock.setsockopt(zmq.HEARTBEAT_TIMEOUT, 3 * LINK_HEARTBEAT_MS)
    for e in endpoints:
        sock.connect(e)


def watch(sock: "zmq.Socket[Any]") -> "zmq.Socket[Any]":
    """The monitor socket of ``sock`` (make it before connecting): readable
    when a connection came up or went down; read with :func:`link_event`.
    A socket of the same kind as ``sock`` (asyncio or not).

    The monitor's inproc address is unique (pyzmq's ``get_monitor_socket``
    names it after the socket's file descriptor, which the next socket may
    get while libzmq still tears down the old monitor: "address in use").

    The reader has no receive limit (``RCVHWM`` 0): a client that reads no
    events for a long while (idle between calls while its router restarts
    again and again) queues a few bytes per event instead of filling the
    pipe, which would block libzmq's I/O thread (see :func:`unwatch`)."""
    addr = f"inproc://emq-link-{uuid.uuid4()}"
    sock.monitor(addr, _EVENTS)
    pair: "zmq.Socket[Any]" = sock.context.socket(zmq.PAIR)
    pair.setsockopt(zmq.LINGER, 0)
    pair.setsockopt(zmq.RCVHWM, 0)
    pair.connect(addr)
    return pair


def unwatch(sock: "zmq.Socket[Any]", pair: "zmq.Socket[Any]") -> None:
    """Undo :func:`watch`: stop the monitor of ``sock`` first, then close
    its reader ``pair`` (the other order can block the context's I/O thread
    for good; see the module documentation). ``sock`` stays open."""
    if not sock.closed:
        try:
            sock.disable_monitor()
        except zmq.ZMQError:
            pass  # the context is terminating: no I/O thread to block
    pair.close(0)


def link_event(frames: Sequence[bytes]) -> Optional[Tuple[bool, str]]:
    """``(up, endpoint)`` of one monitor message, or None for another
    event."""
    if len(frames) != 2 or len(frames[0]) != 6:
        return None
    event, _value = struct.unpack("=Hi", frames[0])
    endpoint = frames[1].decode("utf-8", "replace")
    if event == int(zmq.EVENT_HANDSHAKE_SUCCEEDED):
        return True, endpoint
    if event == int(zmq.EVENT_DISCONNECTED):
        return False, endpoint
    return None


def dealer(
    ctx: "zmq.Context[Any]",
    endpoints: Sequence[str],
    *,
    keys: "Optional[CurveKeys]",
    linger_ms: int,
    send_timeout_ms: Optional[int] = None,
    watched: bool = False,
) -> "Tuple[zmq.Socket[Any], Optional[zmq.Socket[Any]]]":
    """A client's DEALER on ``ctx`` (and its :func:`watch` with
    ``watched``): a uuid4 identity (as 0.3.13's Sender), the CURVE ``keys``
    if any, a short linger, room for 100,000 arrivals, with
    ``send_timeout_ms`` a send timeout (a send that blocks this long means
    no router), connected to every endpoint. ``ZMQError`` leaves nothing
    open."""
    sock = ctx.socket(zmq.DEALER)
    pair = None
    try:
        sock.setsockopt(zmq.IDENTITY, str(uuid.uuid4()).encode())
        if keys is not None:
            keys.apply(sock)
        if send_timeout_ms is not None:
            sock.setsockopt(zmq.SNDTIMEO, send_timeout_ms)
        sock.setsockopt(zmq.LINGER, linger_ms)
        sock.setsockopt(zmq.RCVHWM, 100_000)
        if watched:
            pair = watch(sock)
        connect(sock, endpoints)
    except zmq.ZMQError:
        if pair is not None:
            unwatch(sock, pair)
        sock.close(0)
        raise
    return sock, pair


def close_sockets(
    sock: "Optional[zmq.Socket[Any]]",
    watch: "Optional[zmq.Socket[Any]]",
    admin: "Optional[zmq.Socket[Any]]",
    linger_ms: int,
) -> None:
    """Close a client's sockets: its DEALER ``sock`` (given ``linger_ms``
    for unsent messages) after stopping its connection ``watch`` the right
    way (:func:`unwatch`), and its ``admin`` socket. Used by
    ``close()`` and by a client's ``__del__`` (a client dropped without
    close() would leave the order to the garbage collector)."""
    if watch is not None and sock is not None:
        unwatch(sock, watch)
    if sock is not None:
        sock.close(linger_ms)
    if admin is not None:
        admin.close(0)


def close_on_drop(client: Any) -> None:
    """A client's ``__del__``: its sockets closed as :func:`close_sockets`
    says, if ``close()`` did not run. No receipts or other sends: the
    garbage collector may run on any thread. Nothing in a process forked
    after the sockets were made: they are the parent's."""
    if getattr(client, "_closed", True) or getattr(client, "_pid", None) != os.getpid():
        return
    client._closed = True
    try:
        close_sockets(client._sock, client._watch, client._admin, client._linger_ms)
    except Exception:
        pass
