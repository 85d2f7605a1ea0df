"""Frames in and out of a zmq socket at the lowest cost pyzmq allows.

Both drivers (:mod:`emq_client.client`, and :mod:`emq_client.aio` on its
shadow socket) send and read every message through these functions; a
REQUEST is seven frames and its acknowledgement five, so the cost per frame
is a large part of what a bulk submit costs the client (docs/PERFORMANCE.md, "The
Python client's submit path"). CPU per message, pyzmq 27.3 and Python
3.11 on this project's 2-core machine, the peer in another process:

- **Sending** a seven-frame REQUEST: 2.6 µs through the backend (Cython)
  ``Socket.send`` called unbound, one frame at a time; 4.9 µs through the
  sugar ``Socket.send`` (which first looks at ``routing_id``, ``group``
  and ``Frame``); 15.6 µs with ``send_multipart``.
- **Receiving** a five-frame REPLY: 4.9 µs with ``recv(copy=False)``,
  whose frame already knows whether more follow (``Frame.more``, read by
  libzmq in the same call); 6.9 µs with ``recv()`` and ``get(RCVMORE)``
  per frame (``get`` looks the option up in an enum every time); 8.4 µs
  with ``recv_multipart``.

The functions take any pyzmq socket of the blocking kind (``zmq.Socket``
and its shadows); flags are plain ints (pyzmq's enum arithmetic costs more
than the call).
"""

from __future__ import annotations

from typing import Any, List, Optional

import zmq

# The class every pyzmq socket derives from: its methods, called unbound,
# skip the sugar layer's checks (we only ever send bytes).
_BACKEND = zmq.backend.Socket
_send = _BACKEND.send
_recv = _BACKEND.recv
_get = _BACKEND.get

SNDMORE = int(zmq.SNDMORE)
NOBLOCK = int(zmq.NOBLOCK)
_EVENTS = int(zmq.EVENTS)
_POLLIN = int(zmq.POLLIN)


def send_frames(sock: "zmq.Socket[Any]", frames: List[bytes]) -> None:
    """Send one message (blocking as the socket's ``SNDTIMEO`` says:
    ``zmq.Again`` when it runs out)."""
    for f in frames[:-1]:
        _send(sock, f, SNDMORE)
    _send(sock, frames[-1], 0)


def send_frames_now(sock: "zmq.Socket[Any]", frames: List[bytes]) -> bool:
    """Send one message if the socket takes it without waiting; whether it
    did. Once the first frame went the rest always goes (libzmq queues a
    message whole or not at all)."""
    try:
        _send(sock, frames[0], SNDMORE | NOBLOCK if len(frames) > 1 else NOBLOCK)
    except zmq.Again:
        return False
    if len(frames) > 1:
        for f in frames[1:-1]:
            _send(sock, f, SNDMORE)
        _send(sock, frames[-1], 0)
    return True


def recv_ready(sock: "zmq.Socket[Any]") -> Optional[List[bytes]]:
    """One message if one is waiting, else None (never blocks)."""
    try:
        f = _recv(sock, NOBLOCK, False)
    except zmq.Again:
        return None
    frames = [f.bytes]
    while f.more:
        f = _recv(sock, NOBLOCK, False)
        frames.append(f.bytes)
    return frames


def readable(sock: "zmq.Socket[Any]") -> bool:
    """A message is waiting (no system call)."""
    return bool(int(_get(sock, _EVENTS)) & _POLLIN)
